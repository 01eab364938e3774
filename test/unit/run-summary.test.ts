import type { StepSummary } from '../../core/rl/step-summary';
import { summarizeRunSteps } from '../../core/report/run-summary';

const step = (n: number, base: number, siblings: StepSummary['siblings']): StepSummary => ({
  step: n,
  policyVersionBefore: `v${n}`,
  policyVersion: `v${n + 1}`,
  profileVersion: 1,
  tasks: 4,
  baseRollouts: 16,
  rescueRollouts: 8,
  baseSuccessRate: base,
  deadGroups: 2,
  deadTaskIds: ['a', 'b'],
  rescuedGroups: 1,
  liveGroupFraction: 0.5,
  siblings,
  datums: 10,
  trainerMetrics: {},
  durationSeconds: 1,
  baseMeanReward: base,
  baseRewardStdErr: 0.05,
  logprobMismatch: { tokens: 10 * (n + 1), meanAbsDiff: 0.01 * (n + 1), ratioMean: 1, ratioStd: 0, ratioMin: 1, ratioMax: 1 },
  publishProbeMeanAbsDiff: 0,
  phaseSeconds: null,
  failedGroups: [],
});
const stats = (chosen: number, rescued: number) => ({
  groupsChosen: chosen,
  groupsRescued: rescued,
  rollouts: chosen * 4,
  successes: rescued,
});

test('the run summary totals each sibling per task kind and splits its record into the two halves of the run', () => {
  const summary = summarizeRunSteps({ runId: 'r', name: 'n', simulated: true, basePolicy: 'base' }, [
    step(0, 0.1, { schema: { lookup: stats(2, 2) } }),
    step(1, 0.2, { schema: { lookup: stats(1, 1), aggregate: stats(1, 0) } }),
    step(2, 0.3, { schema: { lookup: stats(2, 0) }, recipe: { multi_step: stats(1, 1) } }),
    step(3, 0.4, { schema: { lookup: stats(1, 0) } }),
  ]);
  expect(summary.baseSuccessStart).toBe(0.1);
  expect(summary.baseSuccessEnd).toBe(0.4);
  expect(summary.policyVersion).toBe('v4');
  expect(summary.siblings.schema.byKind).toEqual({ lookup: stats(6, 3), aggregate: stats(1, 0) });
  expect(summary.siblings.schema.firstHalf).toEqual({ groupsChosen: 4, groupsRescued: 3, rollouts: 16, successes: 3 });
  expect(summary.siblings.schema.secondHalf).toEqual({ groupsChosen: 3, groupsRescued: 0, rollouts: 12, successes: 0 });
  expect(summary.siblings.recipe.firstHalf.groupsChosen).toBe(0);
});

test("the run summary carries the first and last step's mean reward with their errors, and the token-weighted log-prob mismatch", () => {
  const summary = summarizeRunSteps({ runId: 'r', name: 'n', simulated: false, basePolicy: 'base' }, [step(0, 0.1, {}), step(1, 0.3, {})]);
  expect(summary).toMatchObject({ rewardStart: 0.1, rewardStartStdErr: 0.05, rewardEnd: 0.3, rewardEndStdErr: 0.05 });
  // (10 x 0.01 + 20 x 0.02) / 30
  expect(summary.logprobMismatch).toBeCloseTo(0.5 / 30, 10);
});

test('a run with no steps yet has no start or end figures', () => {
  const summary = summarizeRunSteps({ runId: 'r', name: 'n', simulated: true, basePolicy: 'base' }, []);
  expect(summary).toMatchObject({
    stepsCompleted: 0,
    baseSuccessStart: null,
    baseSuccessEnd: null,
    policyVersion: 'base',
    liveGroupFraction: null,
    rewardStart: null,
    rewardEnd: null,
    logprobMismatch: null,
  });
});
