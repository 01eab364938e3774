import type { GroupSummary } from '../../core/rl/groups';
import { assembleTrainingGroups, failureCounts, planRescueGroup } from '../../core/rl/rescue';

const rollout = (harnessId: string, sample: number, success: boolean, failureType: string | null = success ? null : 'wrong_answer') => ({
  harnessId,
  sample,
  reward: success ? 1 : 0,
  success,
  failureType,
  turns: 3,
  tokens: 30,
});

const deadBase: GroupSummary = {
  taskId: 't1',
  kind: 'lookup',
  role: 'base',
  rollouts: [0, 1, 2, 3].map((i) => rollout('base', i, false, i % 2 ? 'format_error' : 'wrong_answer')),
};
const liveBase: GroupSummary = {
  taskId: 't2',
  kind: 'aggregate',
  role: 'base',
  rollouts: [0, 1, 2, 3].map((i) => rollout('base', i, i === 0)),
};
const rescue: GroupSummary = {
  taskId: 't1',
  kind: 'lookup',
  role: 'rescue',
  rollouts: [rollout('ec-schema', 0, true), rollout('ec-schema', 1, false), rollout('ps-recipe', 0, false), rollout('ps-recipe', 1, false)],
};

test('a rescue group gives each of the k harnesses G/k rollouts, so it keeps size G', () => {
  expect(planRescueGroup(['a', 'b'], 8)).toEqual([
    { harnessId: 'a', samples: 4 },
    { harnessId: 'b', samples: 4 },
  ]);
  const uneven = planRescueGroup(['a', 'b', 'c'], 8);
  expect(uneven.reduce((n, p) => n + p.samples, 0)).toBe(8);
});

test('a dead base group is replaced by its rescue group, which keeps size G and each rollout its harness', () => {
  const groups = assembleTrainingGroups([deadBase, liveBase], [rescue], true);
  const rescued = groups.find((g) => g.taskId === 't1')!;
  expect(rescued.role).toBe('rescue');
  expect(rescued.rollouts).toHaveLength(deadBase.rollouts.length);
  expect(rescued.rollouts.map((r) => r.harnessId)).toEqual(['ec-schema', 'ec-schema', 'ps-recipe', 'ps-recipe']);
  expect(rescued.rollouts[0].advantage).toBeGreaterThan(0);
  expect(rescued.rollouts[1].advantage).toBeLessThan(0);
});

test('a live base group stays in the batch as it was', () => {
  const groups = assembleTrainingGroups([deadBase, liveBase], [rescue], true);
  const live = groups.find((g) => g.taskId === 't2')!;
  expect(live.role).toBe('base');
  expect(live.rollouts.map((r) => r.harnessId)).toEqual(['base', 'base', 'base', 'base']);
});

test('a dead group without a rescue group stays dead, with zero advantage', () => {
  const groups = assembleTrainingGroups([deadBase], [], true);
  expect(groups[0].rollouts.every((r) => r.advantage === 0)).toBe(true);
});

test('failure counts tally the base failures by type for the router', () => {
  expect(failureCounts(deadBase)).toEqual({ wrong_answer: 2, format_error: 2 });
});
