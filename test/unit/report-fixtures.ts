/** Small in-memory runs and compares for the report tests. */
import type { BehaviorProfiles, KindCell } from '../../core/router/profiles';
import type { StoredRoutingDecision } from '../../core/store/run-store';
import type { StoredStepSummary } from '../../core/store/rows';
import type { EvaluationSummary } from '../../core/rl/evaluation';
import { summarizeRunSteps } from '../../core/report/run-summary';
import type { CompareResult } from '../../cli/compare';
import type { RunReportData } from '../../core/report/run-report';

export function stepSummary(n: number, overrides: Partial<StoredStepSummary> = {}): StoredStepSummary {
  return {
    step: n,
    policyVersionBefore: n === 0 ? 'sim-policy-base' : `run-1-m-step-${n - 1}`,
    policyVersion: `run-1-m-step-${n}`,
    profileVersion: n < 2 ? 1 : 2,
    tasks: 4,
    baseRollouts: 16,
    rescueRollouts: 8,
    baseSuccessRate: 0.2 + 0.1 * n,
    baseMeanReward: 0.3 + 0.05 * n,
    baseRewardStdErr: 0.04,
    deadGroups: 2,
    deadTaskIds: ['t1', 't2'],
    rescuedGroups: 1,
    liveGroupFraction: 0.5 + 0.1 * n,
    siblings: { 'ec-schema': { lookup: { groupsChosen: 2, groupsRescued: 1, rollouts: 4, successes: 1 } } },
    datums: 12,
    trainerMetrics: {
      'loss:sum': -0.5 + 0.1 * n,
      grad_norm: 1.5 - 0.2 * n,
      'optim/step': n + 1,
      'logprob_mismatch/mean_abs_diff': 1e-7,
      'logprob_mismatch/ratio_mean': 1,
    },
    logprobMismatch: { tokens: 100, meanAbsDiff: 1e-7 * (n + 1), ratioMean: 1, ratioStd: 0, ratioMin: 1, ratioMax: 1 },
    publishProbeMeanAbsDiff: 2e-7,
    durationSeconds: 1.5,
    phaseSeconds: { rollout: 1, train: 0.4, publish: 0.1 },
    failedGroups: [],
    ...overrides,
  };
}

const kindCell = (harnessId: string, kind: string, rescueAttempts: number, rescueSuccesses: number): KindCell => ({
  harnessId,
  kind,
  attempts: 8,
  successes: rescueSuccesses,
  totalTurns: 16,
  rescueAttempts,
  rescueSuccesses,
  rescueTurns: 2 * rescueAttempts,
  rescueTokens: 50 * rescueAttempts,
});

export function profiles(
  version: number,
  policyVersion: string,
  rates: Record<string, Record<string, [number, number]>>,
): BehaviorProfiles {
  const kindCells = [kindCell('base', 'lookup', 0, 0), kindCell('base', 'aggregate', 0, 0)];
  for (const [harness, kinds] of Object.entries(rates))
    for (const [kind, [attempts, successes]] of Object.entries(kinds)) kindCells.push(kindCell(harness, kind, attempts, successes));
  return { version, policyVersion, baseHarnessId: 'base', priorStrength: 2, cells: [], kindCells };
}

export function decision(
  step: number,
  taskId: string,
  profileVersion: number,
  chosen: string[],
  rescuedBy: string[],
): StoredRoutingDecision {
  return {
    step,
    taskId,
    kind: 'lookup',
    strategy: 'validation',
    profileVersion,
    failureSummary: 'wrong_answer x4',
    failureCounts: { wrong_answer: 4 },
    failureDigest: 'd',
    chosen,
    scores: {},
    votes: [],
    fallback: false,
    outcome: Object.fromEntries(chosen.map((h) => [h, { rollouts: 2, successes: rescuedBy.includes(h) ? 1 : 0 }])),
  };
}

export function evaluation(afterSteps: number, base: number, rank1: number): EvaluationSummary {
  const arm = (successRate: number) => ({ rollouts: 8, successRate, byKind: { lookup: { rollouts: 8, successRate } } });
  return {
    afterSteps,
    policyVersion: `p${afterSteps}`,
    profileVersion: 1,
    tasks: 4,
    rolloutsPerTask: 2,
    base: arm(base),
    rank1: arm(rank1),
    rank1Routes: { lookup: 'ec-schema' },
  };
}

export function runReportData(overrides: Partial<RunReportData> = {}): RunReportData {
  const steps = [0, 1, 2].map((n) => stepSummary(n));
  const evaluations = [evaluation(0, 0.25, 0.375), evaluation(1, 0.375, 0.5), evaluation(3, 0.5, 0.625)];
  return {
    runId: 'run-1',
    name: 'report-test',
    env: 'sim',
    simulated: true,
    stepsConfigured: 3,
    createdAt: new Date('2025-01-01T00:00:00Z'),
    steps,
    evaluations,
    profiles: [
      profiles(1, 'sim-policy-base', {
        'ec-schema': { lookup: [8, 6], aggregate: [4, 1] },
        'tr-budget': { lookup: [8, 1], aggregate: [4, 3] },
      }),
      profiles(2, 'run-1-m-step-1', {
        'ec-schema': { lookup: [8, 2], aggregate: [4, 1] },
        'tr-budget': { lookup: [8, 7], aggregate: [4, 4] },
      }),
    ],
    decisions: [
      decision(0, 't1', 1, ['ec-schema', 'tr-budget'], ['ec-schema']),
      decision(1, 't2', 1, ['ec-schema', 'tr-budget'], []),
      decision(2, 't1', 2, ['tr-budget', 'ec-schema'], ['tr-budget']),
    ],
    summary: summarizeRunSteps({ runId: 'run-1', name: 'report-test', simulated: true, basePolicy: 'sim-policy-base' }, steps, evaluations),
    ...overrides,
  };
}

const figures = (baseSuccessEnd: number, liveGroupFraction: number) => ({
  baseSuccessEnd,
  baseSuccessEndStdErr: 0.05,
  rank1SuccessEnd: baseSuccessEnd + 0.1,
  liveGroupFraction,
  rescueRate: 0.5,
  extraRollouts: 16,
  trainingSeconds: 30,
  steps: 4,
  spend: { rollouts: 80 + Math.round(liveGroupFraction * 20), policyTokens: 4000, trainerTokens: 900 },
});

export function compareResult(): CompareResult {
  const diff = (mean: number) => ({ n: 2, mean, lo: mean - 0.05, hi: mean + 0.05, excludesZero: Math.abs(mean) > 0.05 });
  return {
    simulated: true,
    budget: null,
    seeds: [1, 2],
    arms: { 'policy-only': figures(0.3, 0.4), 'harness-s': figures(0.45, 0.7) },
    runs: {
      'policy-only': {
        '1': { ...figures(0.25, 0.35), runId: 'po-1', policyVersion: 'po-1-step-1' },
        '2': { ...figures(0.35, 0.45), runId: 'po-2', policyVersion: 'po-2-step-1' },
      },
      'harness-s': {
        '1': { ...figures(0.4, 0.65), runId: 'hs-1', policyVersion: 'hs-1-step-1' },
        '2': { ...figures(0.5, 0.75), runId: 'hs-2', policyVersion: 'hs-2-step-1' },
      },
    },
    diffs: {
      'harness-s - policy-only': {
        baseSuccessEnd: diff(0.15),
        rank1SuccessEnd: diff(0.15),
        liveGroupFraction: diff(0.3),
        rescueRate: diff(0),
        extraRollouts: { n: 2, mean: 16, lo: 16, hi: 16, excludesZero: false },
        trainingSeconds: { n: 2, mean: -3, lo: -5, hi: -1, excludesZero: true },
      },
    },
    ciMethod: 'paired t over seeds, 95%',
    failures: [],
  };
}

/** Per arm, one list of steps per seed, as the run store would give them. */
export function compareCurves(): Record<string, Array<{ seed: string; steps: StoredStepSummary[] }>> {
  // harness-s spends more per step (rescue rollouts) than policy-only.
  const curve = (offset: number, rollouts: number) =>
    [0, 1, 2].map((n) =>
      stepSummary(n, {
        baseSuccessRate: 0.1 * n + offset,
        liveGroupFraction: 0.2 + 0.1 * n + offset,
        spend: { rollouts, promptTokens: rollouts * 40, completionTokens: rollouts * 8, trainerTokens: rollouts * 30 },
      }),
    );
  return {
    'policy-only': [
      { seed: '1', steps: curve(0, 64) },
      { seed: '2', steps: curve(0.05, 64) },
    ],
    'harness-s': [
      { seed: '1', steps: curve(0.15, 80) },
      { seed: '2', steps: curve(0.2, 88) },
    ],
  };
}
