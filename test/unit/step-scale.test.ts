/**
 * A step at cluster scale, its pure rules: the largest step a config may ask
 * for (the one measured), how a large step is cut into slices, how its batch
 * is cut into chunks, and the trainer's check of the batch it reads back.
 */
import { parseRunConfig, parseStoredRunConfig } from '../../core/config';
import { batchChunks, sliceRanges, sliceReportDue, tasksPerSlice } from '../../core/rl/step-slices';
import { type BatchGroup, IncompleteBatchError, readTrainingBatch } from '../../core/rl/training-batch';

describe('the largest step a config may ask for', () => {
  test('2,048 tasks x G=8 is accepted; one task more is refused with the limit and why', () => {
    expect(parseRunConfig({ rollout: { tasksPerStep: 2048, groupSize: 8 } }).rollout.tasksPerStep).toBe(2048);
    expect(() => parseRunConfig({ rollout: { tasksPerStep: 2049, groupSize: 2 } })).toThrow(
      /rollout\.tasksPerStep: at most 2048 \(the largest step tested: 2048 tasks x G=8 on the sim, every Temporal history under its 10k-event warning\)/,
    );
  });

  test('more than 16,384 rollouts a step is refused, whatever the split between tasks and G', () => {
    expect(parseRunConfig({ rollout: { tasksPerStep: 256, groupSize: 64 }, rescue: { k: 2 } }).rollout.groupSize).toBe(64);
    expect(() => parseRunConfig({ rollout: { tasksPerStep: 2048, groupSize: 10 } })).toThrow(
      /rollout\.groupSize: 2048 tasks x G=10 is 20480 rollouts a step; at most 16384/,
    );
  });

  test('a step with a refill is played in one history: more than 512 draws is refused, the default 3 x tasksPerStep included', () => {
    expect(parseRunConfig({ rollout: { tasksPerStep: 170 }, sampling: { refill: 'dynamic' } }).sampling.refill).toBe('dynamic');
    expect(() => parseRunConfig({ rollout: { tasksPerStep: 200 }, sampling: { refill: 'dynamic' } })).toThrow(
      /sampling\.maxDraws: draws up to 600 tasks \(3 x rollout\.tasksPerStep when sampling\.maxDraws is absent\): at most 512/,
    );
    expect(() => parseRunConfig({ rollout: { tasksPerStep: 256 }, sampling: { refill: 'matched', maxDraws: 513 } })).toThrow(
      /draws up to 513 tasks: at most 512/,
    );
    expect(parseRunConfig({ rollout: { tasksPerStep: 256 }, sampling: { refill: 'matched', maxDraws: 512 } }).sampling.maxDraws).toBe(512);
    expect(() => parseRunConfig({ rollout: { tasksPerStep: 64, groupSize: 64 }, sampling: { refill: 'dynamic', maxDraws: 512 } })).toThrow(
      /up to 512 tasks x G=64 is 32768 rollouts a step; at most 16384/,
    );
  });

  test('a slice may hold at most the 512 base rollouts measured', () => {
    expect(parseRunConfig({}).rollout.rolloutsPerSlice).toBe(512);
    expect(() => parseRunConfig({ rollout: { rolloutsPerSlice: 1024 } })).toThrow(
      /rollout\.rolloutsPerSlice: at most 512: the slice size measured/,
    );
  });

  test('a config the store already holds loads past the limits: a run started before them goes on', () => {
    expect(parseStoredRunConfig({ rollout: { tasksPerStep: 4096, groupSize: 8 } }, 'stored config').rollout.tasksPerStep).toBe(4096);
  });
});

describe('slices', () => {
  test('a slice holds rolloutsPerSlice / G tasks, at least one and at most 256', () => {
    expect(tasksPerSlice(512, 8)).toBe(64);
    expect(tasksPerSlice(512, 2)).toBe(256);
    expect(tasksPerSlice(512, 1000)).toBe(1);
    expect(tasksPerSlice(8, 4)).toBe(2);
  });

  test("a step's tasks are cut into slices in stream order, the last one smaller", () => {
    expect(sliceRanges(5, 2)).toEqual([
      { slice: 0, first: 0, count: 2 },
      { slice: 1, first: 2, count: 2 },
      { slice: 2, first: 4, count: 1 },
    ]);
    expect(sliceRanges(2048, 64)).toHaveLength(32);
    expect(() => sliceRanges(5, 0)).toThrow(/tasks per slice must be a whole number >= 1, not 0/);
  });

  test('a slice tells its step at every eighth of its tasks, so at most 8 times however long it takes', () => {
    const due = Array.from({ length: 64 }, (_, i) => i + 1).filter((done) => sliceReportDue(done, 64));
    expect(due).toEqual([8, 16, 24, 32, 40, 48, 56, 64]);
    expect([1, 2].filter((done) => sliceReportDue(done, 2))).toEqual([1, 2]);
    expect(sliceReportDue(0, 64)).toBe(false);
  });
});

describe('the batch by reference', () => {
  const group = (taskId: string, rollouts: number): BatchGroup => ({
    taskId,
    role: 'base',
    rollouts: Array.from({ length: rollouts }, (_, sample) => ({ harnessId: 'base', sample, advantage: 0.5 })),
  });

  test('a batch is cut into chunks of at most the rollouts given, in order; a larger group is a chunk of its own', () => {
    const chunks = batchChunks([group('a', 4), group('b', 4), group('c', 4), group('d', 12), group('e', 2)], 8);
    expect(chunks.map((c) => [c.first, c.groups.map((g) => g.taskId)])).toEqual([
      [0, ['a', 'b']],
      [2, ['c']],
      [3, ['d']],
      [4, ['e']],
    ]);
    expect(batchChunks([], 8)).toEqual([]);
  });

  test('the trainer refuses a batch that does not hold exactly the groups and rollouts its reference names', async () => {
    const stored = [group('a', 4), group('b', 3)];
    const store = { groups: async (_runId: string, _key: string, count: number) => stored.slice(0, count) };
    await expect(readTrainingBatch(store, 'r', 2, { key: 'r/step-2', groups: 2, rollouts: 7 })).resolves.toEqual(stored);
    await expect(readTrainingBatch(store, 'r', 2, { key: 'r/step-2', groups: 2, rollouts: 8 })).rejects.toThrow(
      new IncompleteBatchError(
        'step 2 of run r: the run store holds 2 groups and 7 rollouts of batch r/step-2, not the 2 groups and 8 rollouts the step wrote; run the step again (harness-s run recover r)',
      ),
    );
    await expect(readTrainingBatch(store, 'r', 2, { key: 'r/step-2', groups: 3, rollouts: 7 })).rejects.toBeInstanceOf(
      IncompleteBatchError,
    );
  });
});
