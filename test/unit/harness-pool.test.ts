import { baseFirst, basePoolIssue, selectPool, splitPool } from '../../core/harness/pool';
import { keepPreEvaluationShape, parseRunConfig } from '../../core/config';

const pool = [
  { id: 'tr', direction: 'trajectory_regulation' as const },
  { id: 'base', direction: 'base' as const },
  { id: 'ar', direction: 'action_realization' as const },
];

test('a pool has exactly one base harness: none or two are refused, naming the count', () => {
  expect(basePoolIssue(pool)).toBeNull();
  expect(basePoolIssue(pool.filter((h) => h.id !== 'base'))).toBe(
    "a harness pool needs exactly one base harness (direction 'base'); found 0",
  );
  expect(() => splitPool([...pool, { id: 'base2', direction: 'base' }])).toThrow('found 2');
});

test('a pool is listed base first, siblings in their order', () => {
  expect(baseFirst(pool).map((h) => h.id)).toEqual(['base', 'tr', 'ar']);
  const { base, siblings } = splitPool(pool);
  expect(base.id).toBe('base');
  expect(siblings.map((h) => h.id)).toEqual(['tr', 'ar']);
});

test("a run's harnessPool picks from the env's pool in its order, and names every id the env lacks", () => {
  expect(selectPool(pool, []).pool.map((h) => h.id)).toEqual(['tr', 'base', 'ar']);
  expect(selectPool(pool, ['ar', 'base'])).toEqual({ pool: [pool[2], pool[1]], unknown: [] });
  expect(selectPool(pool, ['base', 'nope', 'ar', 'gone']).unknown).toEqual([
    { index: 1, id: 'nope' },
    { index: 3, id: 'gone' },
  ]);
});

test('a run stored before evaluation existed keeps training on every task and never evaluates; others are unchanged', () => {
  const config = parseRunConfig({ name: 'x' });
  const { eval: _dropped, ...stored } = config;
  expect(keepPreEvaluationShape(config, stored).eval).toMatchObject({ enabled: false, heldOut: 0 });
  expect(keepPreEvaluationShape(config, config)).toBe(config);
});
