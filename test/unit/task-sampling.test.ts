import { drawDistinct, splitTasks } from '../../core/rl/task-sampling';

const pool = Array.from({ length: 100 }, (_, i) => `task-${i}`);

test('the same seed and step always draw the same tasks', () => {
  expect(drawDistinct(pool, 16, 1, 5)).toEqual(drawDistinct(pool, 16, 1, 5));
});

test('another step or another seed draws another sample', () => {
  expect(drawDistinct(pool, 16, 1, 5)).not.toEqual(drawDistinct(pool, 16, 1, 6));
  expect(drawDistinct(pool, 16, 1, 5)).not.toEqual(drawDistinct(pool, 16, 2, 5));
});

test('a draw has distinct tasks and never more than the pool holds', () => {
  const draw = drawDistinct(pool, 16, 3, 0);
  expect(new Set(draw).size).toBe(16);
  expect(drawDistinct(pool.slice(0, 5), 16, 3, 0)).toHaveLength(5);
});

const tasks = ['lookup', 'aggregate'].flatMap((kind) => Array.from({ length: 10 }, (_, i) => ({ taskId: `${kind}-${i}`, kind })));

test('the eval split holds out the same share of every kind, apart from the training tasks, the same each time', () => {
  const { train, eval: held } = splitTasks(tasks, 0.2);
  expect(held.filter((t) => t.kind === 'lookup')).toHaveLength(2);
  expect(held.filter((t) => t.kind === 'aggregate')).toHaveLength(2);
  expect(train).toHaveLength(16);
  expect(train.filter((t) => held.some((h) => h.taskId === t.taskId))).toEqual([]);
  expect(splitTasks(tasks, 0.2)).toEqual({ train, eval: held });
});

test('a kind keeps at least one training task, so a single-task kind is not evaluated; no hold-out evaluates on the training tasks', () => {
  const two = [
    { taskId: 'a', kind: 'x' },
    { taskId: 'b', kind: 'x' },
    { taskId: 'c', kind: 'y' },
  ];
  const split = splitTasks(two, 0.9);
  expect(split.eval.map((t) => t.kind)).toEqual(['x']);
  expect(split.train.map((t) => t.kind).sort()).toEqual(['x', 'y']);
  expect(splitTasks(two, 0)).toEqual({ train: two, eval: two });
});
