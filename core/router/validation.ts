/**
 * The validation rule (the router's default strategy): rank sibling harnesses
 * by their profile evidence for the dead group's task kind and base failure
 * types, ties broken by cost (mean turns), then by id for determinism.
 * Pure and deterministic, so workflows may call it.
 */
import { meanTurns, smoothedRescueRate, type BehaviorProfiles } from './profiles';

export interface DeadGroup {
  taskId: string;
  kind: string;
  /** How many of the G base attempts failed with each failure type. */
  failureCounts: Record<string, number>;
}

/** Every sibling, best first, with the expected rescue rate it was ranked by. */
export interface ValidationRanking {
  ranked: string[];
  scores: Record<string, number>;
}

/** Expected rescue rate of a sibling for this dead group: failure-type-weighted smoothed rates. */
export function rescueScore(profiles: BehaviorProfiles, harnessId: string, group: DeadGroup): number {
  const entries = Object.entries(group.failureCounts);
  const total = entries.reduce((n, [, count]) => n + count, 0);
  if (total === 0) return 0;
  return entries.reduce(
    (score, [failureType, count]) => score + (count / total) * smoothedRescueRate(profiles, harnessId, group.kind, failureType),
    0,
  );
}

export function rankByValidation(profiles: BehaviorProfiles, siblings: readonly string[], group: DeadGroup): ValidationRanking {
  const scores: Record<string, number> = {};
  for (const id of siblings) scores[id] = rescueScore(profiles, id, group);
  const ranked = [...siblings].sort(
    (a, b) => scores[b] - scores[a] || meanTurns(profiles, a, group.kind) - meanTurns(profiles, b, group.kind) || a.localeCompare(b),
  );
  return { ranked, scores };
}

/** The validation rule's top k. */
export function routeByValidation(
  profiles: BehaviorProfiles,
  siblings: readonly string[],
  group: DeadGroup,
  k: number,
): { chosen: string[]; scores: Record<string, number> } {
  const { ranked, scores } = rankByValidation(profiles, siblings, group);
  return { chosen: ranked.slice(0, k), scores };
}
