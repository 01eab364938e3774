/** When a step saves the training state, and which checkpoints are kept. */
import { checkpointDue, checkpointsBeyondKeep, trainingCheckpointName } from '../../core/trainer/training-checkpoints';

test('a checkpoint is due after every N-th step and after the last one; every 0 saves after the last only', () => {
  const due = (every: number, steps: number) =>
    [...Array(steps).keys()].filter((step) => checkpointDue(step, { steps, checkpoint: { every } }));
  expect(due(5, 12)).toEqual([4, 9, 11]);
  expect(due(4, 12)).toEqual([3, 7, 11]);
  expect(due(0, 6)).toEqual([5]);
  expect(due(1, 3)).toEqual([0, 1, 2]);
});

test('a config from before checkpoints saves every 5 steps and after the last', () => {
  expect([...Array(11).keys()].filter((step) => checkpointDue(step, { steps: 11 }))).toEqual([4, 9, 10]);
});

test('the newest `keep` checkpoints by step are kept, whatever order they come in', () => {
  const live = [7, 1, 5, 3].map((step) => ({ step, name: trainingCheckpointName(step) }));
  expect(checkpointsBeyondKeep(live, 2).map((c) => c.name)).toEqual(['state-3', 'state-1']);
  expect(checkpointsBeyondKeep(live, 4)).toEqual([]);
});
