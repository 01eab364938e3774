/**
 * A run's totals from its recorded step summaries and evaluations: what `run
 * status`, the run report and a run's result show.
 */
import type { EvaluationSummary } from '../rl/evaluation';
import { mismatchByStaleness, totalSpend, type RunSpend, type SiblingStepStats, type StalenessMismatch } from '../rl/step-summary';
import type { StoredStepSummary } from '../store/rows';

export interface SiblingRescueStats extends SiblingStepStats {
  byKind: Record<string, SiblingStepStats>;
  /** The first and the second half of the run's steps: how the sibling's value moved as the policy learned. */
  firstHalf: SiblingStepStats;
  secondHalf: SiblingStepStats;
}

export interface RunSummary {
  runId: string;
  name: string;
  simulated: boolean;
  stepsCompleted: number;
  policyVersion: string;
  baseSuccessStart: number | null;
  baseSuccessEnd: number | null;
  /** Mean base-rollout reward of the first and of the last step, each with its standard error. */
  rewardStart: number | null;
  rewardStartStdErr: number | null;
  rewardEnd: number | null;
  rewardEndStdErr: number | null;
  /** Mean |trainer - sampler| log-prob of the trained tokens over the run (token-weighted); null when nothing was trained or measured. */
  logprobMismatch: number | null;
  /** Wall-clock seconds from the first step's start to the last step's end; absent where the store's times were not read. */
  trainingSeconds?: number;
  /** The same per staleness (policy versions between sampler and trainer): "0" only unless steps were pipelined. */
  mismatchByStaleness: Record<string, StalenessMismatch>;
  deadGroups: number;
  rescuedGroups: number;
  rescueRollouts: number;
  /** Mean over steps of the fraction of groups with a non-zero advantage. */
  liveGroupFraction: number | null;
  siblings: Record<string, SiblingRescueStats>;
  /** Every evaluatePolicy result, in order; the last is the run's end. */
  evaluations: EvaluationSummary[];
  /** What the run's training steps spent (absent from summaries made before it was counted). */
  spend?: RunSpend;
  /** Eval-split success at the end under the base harness and under Rank-1 routing (null without evaluation). */
  baseEvalEnd: number | null;
  rank1EvalEnd: number | null;
}

/**
 * A run's summary as a workflow result recorded it: results from before
 * evaluation existed have no evaluations, and from before pipelining no
 * mismatch per staleness; both read as empty. `spend` stays absent where
 * it was not counted (no spend is not zero spend).
 */
export function upgradeRunSummary(recorded: RunSummary): RunSummary {
  const old: Partial<Pick<RunSummary, 'evaluations' | 'mismatchByStaleness'>> = recorded;
  return { ...recorded, evaluations: old.evaluations ?? [], mismatchByStaleness: old.mismatchByStaleness ?? {} };
}

const emptyStats = (): SiblingStepStats => ({ groupsChosen: 0, groupsRescued: 0, rollouts: 0, successes: 0 });

function addStats(into: SiblingStepStats, from: SiblingStepStats): void {
  into.groupsChosen += from.groupsChosen;
  into.groupsRescued += from.groupsRescued;
  into.rollouts += from.rollouts;
  into.successes += from.successes;
}

/** The run's totals from its step summaries, in step order. */
export function summarizeRunSteps(
  run: { runId: string; name: string; simulated: boolean; basePolicy: string },
  steps: readonly StoredStepSummary[],
  evaluations: readonly EvaluationSummary[] = [],
): RunSummary {
  const siblings: Record<string, SiblingRescueStats> = {};
  steps.forEach((step, i) => {
    for (const [harnessId, byKind] of Object.entries(step.siblings)) {
      const total = (siblings[harnessId] ??= { ...emptyStats(), byKind: {}, firstHalf: emptyStats(), secondHalf: emptyStats() });
      const half = i < steps.length / 2 ? total.firstHalf : total.secondHalf;
      for (const [kind, stats] of Object.entries(byKind)) {
        addStats(total, stats);
        addStats(half, stats);
        addStats((total.byKind[kind] ??= emptyStats()), stats);
      }
    }
  });
  const last = steps.at(-1);
  const measured = steps.flatMap((s) => (s.logprobMismatch ? [s.logprobMismatch] : []));
  const mismatchTokens = measured.reduce((n, m) => n + m.tokens, 0);
  return {
    runId: run.runId,
    name: run.name,
    simulated: run.simulated,
    stepsCompleted: steps.length,
    policyVersion: last?.policyVersion ?? run.basePolicy,
    baseSuccessStart: steps[0]?.baseSuccessRate ?? null,
    baseSuccessEnd: last?.baseSuccessRate ?? null,
    rewardStart: steps[0]?.baseMeanReward ?? null,
    rewardStartStdErr: steps[0]?.baseRewardStdErr ?? null,
    rewardEnd: last?.baseMeanReward ?? null,
    rewardEndStdErr: last?.baseRewardStdErr ?? null,
    logprobMismatch: mismatchTokens > 0 ? measured.reduce((sum, m) => sum + m.meanAbsDiff * m.tokens, 0) / mismatchTokens : null,
    mismatchByStaleness: mismatchByStaleness(steps),
    deadGroups: steps.reduce((n, s) => n + s.deadGroups, 0),
    rescuedGroups: steps.reduce((n, s) => n + s.rescuedGroups, 0),
    rescueRollouts: steps.reduce((n, s) => n + s.rescueRollouts, 0),
    liveGroupFraction: steps.length ? steps.reduce((n, s) => n + s.liveGroupFraction, 0) / steps.length : null,
    siblings,
    evaluations: [...evaluations],
    spend: totalSpend(steps),
    baseEvalEnd: evaluations.at(-1)?.base.successRate ?? null,
    rank1EvalEnd: evaluations.at(-1)?.rank1.successRate ?? null,
  };
}
