import { sampleTasks } from '../../core/rl/task-sampling';

const pool = Array.from({ length: 100 }, (_, i) => `task-${i}`);

test('the same seed and step always draw the same tasks', () => {
  expect(sampleTasks(pool, 16, 1, 5)).toEqual(sampleTasks(pool, 16, 1, 5));
});

test('another step or another seed draws another sample', () => {
  expect(sampleTasks(pool, 16, 1, 5)).not.toEqual(sampleTasks(pool, 16, 1, 6));
  expect(sampleTasks(pool, 16, 1, 5)).not.toEqual(sampleTasks(pool, 16, 2, 5));
});

test('a draw has distinct tasks and never more than the pool holds', () => {
  const draw = sampleTasks(pool, 16, 3, 0);
  expect(new Set(draw).size).toBe(16);
  expect(sampleTasks(pool.slice(0, 5), 16, 3, 0)).toHaveLength(5);
});
