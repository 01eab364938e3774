import { summarizeEvaluation, type EvaluatedTask } from '../../core/rl/evaluation';
import { armDiffs, meanFigures, planCompare } from '../../cli/compare';
import { picksByProfileVersion } from '../../core/router/picks';
import type { StoredRoutingDecision } from '../../core/store/run-store';

const rollouts = (harnessId: string, ...success: boolean[]) =>
  success.map((ok, sample) => ({
    harnessId,
    sample,
    reward: ok ? 1 : 0,
    success: ok,
    failureType: ok ? null : 'wrong_answer',
    turns: 3,
    tokens: 30,
  }));

const tasks: EvaluatedTask[] = [
  { taskId: 'l1', kind: 'lookup', base: rollouts('base', true, false), rank1: rollouts('schema', true, true) },
  { taskId: 'l2', kind: 'lookup', base: rollouts('base', false, false), rank1: rollouts('schema', true, false) },
  { taskId: 'a1', kind: 'api', base: rollouts('base', true, true), rank1: rollouts('base', true, true) },
];

test('an evaluation reports success per arm overall and per kind, with the same rollouts in both arms', () => {
  const summary = summarizeEvaluation({
    afterSteps: 4,
    policyVersion: 'p4',
    profileVersion: 2,
    rolloutsPerTask: 2,
    rank1Routes: { lookup: 'schema', api: 'base' },
    tasks,
  });
  expect(summary.base).toEqual({
    rollouts: 6,
    successRate: 3 / 6,
    byKind: { api: { rollouts: 2, successRate: 1 }, lookup: { rollouts: 4, successRate: 1 / 4 } },
  });
  expect(summary.rank1).toEqual({
    rollouts: 6,
    successRate: 5 / 6,
    byKind: { api: { rollouts: 2, successRate: 1 }, lookup: { rollouts: 4, successRate: 3 / 4 } },
  });
  expect(summary).toMatchObject({ afterSteps: 4, tasks: 3, rolloutsPerTask: 2 });
});

test('an evaluation whose arms ran unequal rollouts is refused', () => {
  const unequal = [{ ...tasks[0], rank1: rollouts('schema', true) }];
  expect(() =>
    summarizeEvaluation({ afterSteps: 1, policyVersion: 'p', profileVersion: 1, rolloutsPerTask: 2, rank1Routes: {}, tasks: unequal }),
  ).toThrow(/l1: 2 base and 1 Rank-1 rollouts, expected 2 each/);
});

test('compare reports each figure as the mean over seeds', () => {
  const mean = meanFigures([
    {
      baseSuccessEnd: 0.2,
      baseSuccessEndStdErr: 0.02,
      rank1SuccessEnd: 0.4,
      liveGroupFraction: 0.5,
      rescueRate: 0.6,
      extraRollouts: 100,
      trainingSeconds: 10,
      steps: 20,
      spend: { rollouts: 1000, policyTokens: 5000, trainerTokens: 800, gpuSeconds: 4 },
    },
    {
      baseSuccessEnd: 0.4,
      baseSuccessEndStdErr: 0.04,
      rank1SuccessEnd: 0.6,
      liveGroupFraction: 0.7,
      rescueRate: 0.8,
      extraRollouts: 200,
      trainingSeconds: 20,
      steps: 10,
      spend: { rollouts: 2000, policyTokens: 7000, trainerTokens: 600 },
    },
  ]);
  expect(mean.baseSuccessEnd).toBeCloseTo(0.3, 12);
  expect(mean.rank1SuccessEnd).toBeCloseTo(0.5, 12);
  expect(mean.liveGroupFraction).toBeCloseTo(0.6, 12);
  expect(mean.rescueRate).toBeCloseTo(0.7, 12);
  expect(mean.extraRollouts).toBe(150);
  expect(mean.trainingSeconds).toBe(15);
  expect(mean.steps).toBe(15);
  // GPU-seconds only where every seed had them (the latency model ran).
  expect(mean.spend).toEqual({ rollouts: 1500, policyTokens: 6000, trainerTokens: 700 });
});

test('compare pairs arms by seed: each later arm minus each earlier one, over the seeds both finished', () => {
  const run = (baseSuccessEnd: number) => ({
    baseSuccessEnd,
    baseSuccessEndStdErr: 0,
    rank1SuccessEnd: 0,
    liveGroupFraction: 0,
    rescueRate: 0,
    extraRollouts: 0,
    trainingSeconds: 0,
    steps: 1,
    spend: { rollouts: 0, policyTokens: 0, trainerTokens: 0 },
    runId: 'r',
    policyVersion: 'r-step-0',
  });
  const diffs = armDiffs(['policy-only', 'harness-s', 'random-k'], {
    'policy-only': { 1: run(0.2), 2: run(0.3), 3: run(0.4) },
    'harness-s': { 1: run(0.3), 2: run(0.45), 3: run(0.5) },
    'random-k': { 1: run(0.2), 2: run(0.3) },
  });
  expect(Object.keys(diffs)).toEqual(['harness-s - policy-only', 'random-k - policy-only', 'random-k - harness-s']);
  expect(diffs['harness-s - policy-only'].baseSuccessEnd).toMatchObject({ n: 3, mean: expect.closeTo(0.35 / 3, 12), excludesZero: true });
  expect(diffs['random-k - policy-only'].baseSuccessEnd).toMatchObject({ n: 2, mean: 0 });
  expect(diffs['random-k - harness-s'].baseSuccessEnd.mean).toBeCloseTo(-0.125, 12);
});

test('router picks are counted per profile version and task kind, with the picks whose rescue rollouts succeeded', () => {
  const decision = (profileVersion: number, kind: string, chosen: string[], outcome: StoredRoutingDecision['outcome']) =>
    ({ profileVersion, kind, chosen, outcome }) as StoredRoutingDecision;
  const picks = picksByProfileVersion([
    decision(1, 'lookup', ['schema', 'recipe'], { schema: { rollouts: 4, successes: 1 }, recipe: { rollouts: 4, successes: 0 } }),
    decision(1, 'lookup', ['schema', 'budget'], null),
    decision(1, 'api', ['budget', 'recipe'], { budget: { rollouts: 4, successes: 0 }, recipe: { rollouts: 4, successes: 3 } }),
    decision(2, 'lookup', ['budget', 'recipe'], { budget: { rollouts: 4, successes: 2 }, recipe: { rollouts: 4, successes: 0 } }),
  ]);
  expect(picks).toEqual({
    1: {
      lookup: { schema: { chosen: 2, rescued: 1 }, recipe: { chosen: 1, rescued: 0 }, budget: { chosen: 1, rescued: 0 } },
      api: { budget: { chosen: 1, rescued: 0 }, recipe: { chosen: 1, rescued: 1 } },
    },
    2: { lookup: { budget: { chosen: 1, rescued: 1 }, recipe: { chosen: 1, rescued: 0 } } },
  });
});

test('compare refuses a seed or arm given twice, before anything starts', () => {
  expect(() => planCompare({}, ['policy-only', 'harness-s'], [1, 1])).toThrow(/each arm and seed once; repeated: 1/);
  expect(() => planCompare({}, ['harness-s', 'harness-s'], [1])).toThrow(/repeated: harness-s/);
});

test('compare arms change only what they name and always evaluate', () => {
  const plan = planCompare({ name: 'x', rescue: { k: 4 }, eval: { enabled: false, rollouts: 2 } }, ['policy-only', 'random-k'], [3]);
  expect(
    plan.map((p) => [
      p.arm,
      p.config.rescue.enabled,
      p.config.rescue.k,
      p.config.router.strategy,
      p.config.eval.enabled,
      p.config.eval.rollouts,
      p.config.seed,
    ]),
  ).toEqual([
    ['policy-only', false, 4, 'validation', true, 2, 3],
    ['random-k', true, 4, 'random', true, 2, 3],
  ]);
});
