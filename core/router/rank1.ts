/**
 * Rank-1 routing for evaluation: each task goes to the single harness of the
 * pool (the base included) with the best measured success on the task's kind,
 * with the policy version the profiles were measured with. Pure, so
 * workflows and activities may both call it.
 */
import type { BehaviorProfiles } from './profiles';

/**
 * Smoothed success of a harness on a kind: (successes + s * p0) / (attempts + s),
 * p0 the success of all harnesses on the kind, s the profiles' prior strength.
 */
export function kindSuccessRate(profiles: BehaviorProfiles, harnessId: string, kind: string): number {
  const ofKind = profiles.kindCells.filter((c) => c.kind === kind);
  const total = ofKind.reduce((n, c) => n + c.attempts, 0);
  const prior = total === 0 ? 0 : ofKind.reduce((n, c) => n + c.successes, 0) / total;
  const cell = ofKind.find((c) => c.harnessId === harnessId);
  const s = profiles.priorStrength;
  if (!cell || cell.attempts + s === 0) return prior;
  return (cell.successes + s * prior) / (cell.attempts + s);
}

/** Rank-1 routing of every kind: kind -> its Rank-1 harness. */
export function rank1Routes(
  profiles: BehaviorProfiles,
  harnessIds: readonly string[],
  baseHarnessId: string,
  kinds: readonly string[],
): Record<string, string> {
  return Object.fromEntries(kinds.map((kind) => [kind, rank1Harness(profiles, harnessIds, baseHarnessId, kind)]));
}

/**
 * The Rank-1 harness of a kind: highest smoothed success; on a tie the base
 * harness (no evidence to leave it), then fewer mean turns, then id.
 */
export function rank1Harness(profiles: BehaviorProfiles, harnessIds: readonly string[], baseHarnessId: string, kind: string): string {
  const turns = (id: string) => {
    const cell = profiles.kindCells.find((c) => c.harnessId === id && c.kind === kind);
    return cell && cell.attempts ? cell.totalTurns / cell.attempts : Number.POSITIVE_INFINITY;
  };
  const ranked = [...harnessIds].sort(
    (a, b) =>
      kindSuccessRate(profiles, b, kind) - kindSuccessRate(profiles, a, kind) ||
      Number(b === baseHarnessId) - Number(a === baseHarnessId) ||
      turns(a) - turns(b) ||
      a.localeCompare(b),
  );
  return ranked[0] ?? baseHarnessId;
}
