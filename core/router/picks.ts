/** How the router used each sibling under each profile version: chosen, and rescued (a success among its rescue rollouts). */
import type { RoutingDecision } from './router';

/** A routing decision as stored, with how each chosen sibling did once its step was recorded. */
export interface StoredRoutingDecision extends RoutingDecision {
  step: number;
  /** harness id -> its rescue rollouts and successes; null until the step is recorded. */
  outcome: Record<string, { rollouts: number; successes: number }> | null;
}

export interface PickStats {
  chosen: number;
  /** Chosen and at least one of its rescue rollouts succeeded. */
  rescued: number;
}

/** profile version -> task kind -> sibling -> how the router used it while that version was current. */
export type RouterPicks = Record<string, Record<string, Record<string, PickStats>>>;

export function picksByProfileVersion(decisions: readonly StoredRoutingDecision[]): RouterPicks {
  const picks: RouterPicks = {};
  for (const decision of decisions) {
    const byHarness = ((picks[String(decision.profileVersion)] ??= {})[decision.kind] ??= {});
    for (const harnessId of decision.chosen) {
      const stats = (byHarness[harnessId] ??= { chosen: 0, rescued: 0 });
      stats.chosen += 1;
      stats.rescued += (decision.outcome?.[harnessId]?.successes ?? 0) > 0 ? 1 : 0;
    }
  }
  return picks;
}
