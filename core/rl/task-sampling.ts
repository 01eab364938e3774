/**
 * Deterministic task sampling: the same (seed, step) always draws the same tasks,
 * so a retried or replayed step, and every arm of an ablation, sees one sample.
 */
import { hashSeed, mulberry32 } from '../random';

/**
 * Draws `count` distinct items (fewer if the pool is smaller) by a partial
 * Fisher-Yates shuffle seeded from (seed, step).
 */
export function sampleTasks<T>(pool: readonly T[], count: number, seed: number, step: number): T[] {
  const random = mulberry32(hashSeed('tasks', seed, step));
  const items = pool.slice();
  const n = Math.min(count, items.length);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(random() * (items.length - i));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items.slice(0, n);
}
