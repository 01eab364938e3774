/**
 * Select: each candidate's measured effect, and per direction the one kept.
 *
 * A candidate is scored on the tasks its direction targets and on the
 * regression sample (tasks the base solves):
 *   targetRescueRate  = its successes / rollouts on the targets
 *   baseRateOnTargets = the base's on the same targets, from fresh rollouts
 *                       (the diagnosis picked those tasks for failing, so its
 *                       own rollouts would understate the base)
 *   regressionRate    = 1 - its success on the regression sample
 *   score             = targetRescueRate - penalty * regressionRate
 * Per direction and round the best score is kept (ties: higher rescue rate,
 * then lower regression rate, then the one kept before, then the earlier
 * slot); it parents the next round. A direction's best enters the pool only
 * when its rescue rate on its targets is above the base's, both in its
 * validation and afresh (freshEffectOnTargets). Pure: the workflow calls it.
 */
import { pairedDifference, type PairedDifference } from '../stats';
import type { EvolutionGroup, TargetTask } from './diagnosis';
import { DIRECTION_PREFIX, type SiblingDirection } from './failure-directions';

/** ar-r1-c2: the candidate of round 1, slot 2, of action realization. */
export function candidateIdOf(direction: SiblingDirection, round: number, slot: number): string {
  return `${DIRECTION_PREFIX[direction]}-r${round}-c${slot}`;
}

export interface CandidateRef {
  candidateId: string;
  direction: SiblingDirection;
  round: number;
  slot: number;
  parent: string;
  version: string;
}

export interface CandidateResult extends CandidateRef {
  targetRescueRate: number;
  baseRateOnTargets: number;
  regressionRate: number;
  score: number;
  /** Rollouts on the targets and on the regression sample. */
  targetRollouts: number;
  regressionRollouts: number;
  /** kind -> success on that kind's targets. */
  byKind: Record<string, { rollouts: number; successes: number }>;
}

function rate(groups: readonly EvolutionGroup[]): { rollouts: number; successes: number; rate: number } {
  const rollouts = groups.reduce((n, g) => n + g.rollouts, 0);
  const successes = groups.reduce((n, g) => n + g.successes, 0);
  return { rollouts, successes, rate: rollouts ? successes / rollouts : 0 };
}

export function summarizeCandidate(args: {
  candidate: CandidateRef;
  /** The candidate's validation groups (targets and regression sample). */
  groups: readonly EvolutionGroup[];
  targets: readonly TargetTask[];
  regressionTaskIds: readonly string[];
  /** The base's fresh groups on the targets. */
  baseline: readonly EvolutionGroup[];
  penalty: number;
}): CandidateResult {
  const targetIds = new Set(args.targets.map((t) => t.taskId));
  const regressionIds = new Set(args.regressionTaskIds);
  const onTargets = args.groups.filter((g) => targetIds.has(g.taskId));
  const onRegression = args.groups.filter((g) => regressionIds.has(g.taskId));
  const target = rate(onTargets);
  const base = rate(args.baseline.filter((g) => targetIds.has(g.taskId)));
  const regression = rate(onRegression);
  const regressionRate = regression.rollouts ? 1 - regression.rate : 0;
  const byKind: CandidateResult['byKind'] = {};
  for (const g of onTargets) {
    const cell = (byKind[g.kind] ??= { rollouts: 0, successes: 0 });
    cell.rollouts += g.rollouts;
    cell.successes += g.successes;
  }
  return {
    ...args.candidate,
    targetRescueRate: target.rate,
    baseRateOnTargets: base.rate,
    regressionRate,
    score: target.rate - args.penalty * regressionRate,
    targetRollouts: target.rollouts,
    regressionRollouts: regression.rollouts,
    byKind,
  };
}

export interface DroppedCandidate {
  slot: number;
  reason: string;
}

export interface SelectionDecision {
  round: number;
  direction: SiblingDirection;
  /** The candidate kept after this round (parent of the next); null while the base is still the best. */
  kept: string | null;
  previous: string | null;
  ranked: Array<Pick<CandidateResult, 'candidateId' | 'score' | 'targetRescueRate' | 'baseRateOnTargets' | 'regressionRate'>>;
  dropped: DroppedCandidate[];
  reason: string;
}

function better(a: CandidateResult, b: CandidateResult): boolean {
  if (a.score !== b.score) return a.score > b.score;
  if (a.targetRescueRate !== b.targetRescueRate) return a.targetRescueRate > b.targetRescueRate;
  if (a.regressionRate !== b.regressionRate) return a.regressionRate < b.regressionRate;
  return false;
}

/** The best of the round's candidates and the one kept before (kept on ties). */
export function selectForDirection(args: {
  round: number;
  direction: SiblingDirection;
  previous: CandidateResult | null;
  results: readonly CandidateResult[];
  dropped: readonly DroppedCandidate[];
}): { best: CandidateResult | null; decision: SelectionDecision } {
  const ordered = [...args.results].sort((a, b) => a.slot - b.slot);
  let best = args.previous;
  for (const r of ordered) if (best === null || better(r, best)) best = r;
  const ranked = [...ordered, ...(args.previous ? [args.previous] : [])]
    .sort((a, b) => (better(a, b) ? -1 : better(b, a) ? 1 : 0))
    .map(({ candidateId, score, targetRescueRate, baseRateOnTargets, regressionRate }) => ({
      candidateId,
      score,
      targetRescueRate,
      baseRateOnTargets,
      regressionRate,
    }));
  const reason =
    best === null
      ? 'no candidate was validated in this direction yet'
      : best === args.previous
        ? `kept ${best.candidateId}: no candidate of round ${args.round} scored higher (${best.score.toFixed(3)})`
        : `${best.candidateId} scored highest: rescue ${best.targetRescueRate.toFixed(3)} on its targets (base ${best.baseRateOnTargets.toFixed(3)}), regression ${best.regressionRate.toFixed(3)}`;
  return {
    best,
    decision: {
      round: args.round,
      direction: args.direction,
      kept: best?.candidateId ?? null,
      previous: args.previous?.candidateId ?? null,
      ranked,
      dropped: [...args.dropped],
      reason,
    },
  };
}

/** Whether a direction's best candidate enters the frozen pool: it must rescue more of its targets than the base solves. */
export function beatsBase(result: CandidateResult | null): boolean {
  return result !== null && result.targetRescueRate > result.baseRateOnTargets;
}

/**
 * A sibling's effect on its targets measured afresh (the effect phase: new
 * seeds, after it was chosen, so the choice's luck is not in it): its rescue
 * rate, the base's, and the difference paired by task with its 95% t
 * interval over the tasks (rollouts of one task are not independent; tasks
 * are the unit).
 */
export interface FreshEffect {
  targetRescueRate: number;
  baseRateOnTargets: number;
  difference: PairedDifference;
}

export function freshEffectOnTargets(args: {
  candidateId: string;
  targets: readonly TargetTask[];
  groups: readonly EvolutionGroup[];
  baseline: readonly EvolutionGroup[];
}): FreshEffect {
  const rateOn = (groups: readonly EvolutionGroup[], taskId: string) => {
    const g = groups.filter((x) => x.taskId === taskId);
    const n = g.reduce((a, x) => a + x.rollouts, 0);
    return n ? g.reduce((a, x) => a + x.successes, 0) / n : 0;
  };
  const own = args.groups.filter((g) => g.candidateId === args.candidateId);
  const ids = args.targets.map((t) => t.taskId);
  const sibling = ids.map((id) => rateOn(own, id));
  const base = ids.map((id) => rateOn(args.baseline, id));
  const targetIds = new Set(ids);
  return {
    targetRescueRate: rate(own.filter((g) => targetIds.has(g.taskId))).rate,
    baseRateOnTargets: rate(args.baseline.filter((g) => targetIds.has(g.taskId))).rate,
    difference: pairedDifference(sibling, base),
  };
}
