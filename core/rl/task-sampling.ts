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

/**
 * The env's tasks split into training and eval tasks: per kind, a fixed share
 * `heldOut` is held out, at least one task but never all of a kind (so a kind
 * with a single task trains and is not evaluated). The split depends
 * on the task list only, not on the run's seed, so every run and every arm of
 * an ablation trains and evaluates on the same tasks.
 */
export function splitTasks<T extends { taskId: string; kind: string }>(tasks: readonly T[], heldOut: number): { train: T[]; eval: T[] } {
  if (heldOut <= 0) return { train: [...tasks], eval: [...tasks] };
  const held = new Set<string>();
  for (const kind of new Set(tasks.map((t) => t.kind))) {
    const ofKind = tasks.filter((t) => t.kind === kind);
    const count = Math.min(ofKind.length - 1, Math.max(1, Math.round(ofKind.length * heldOut)));
    for (const task of sampleTasks(ofKind, count, hashSeed('eval-split', kind), 0)) held.add(task.taskId);
  }
  return { train: tasks.filter((t) => !held.has(t.taskId)), eval: tasks.filter((t) => held.has(t.taskId)) };
}
