/**
 * Deterministic task sampling: the same (seed, step) always draws the same tasks,
 * so a retried or replayed step, and every arm of an ablation, sees one sample.
 */
import { drawDistinct, hashSeed } from '../random';

export { drawDistinct };

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
    for (const task of drawDistinct(ofKind, count, hashSeed('eval-split', kind), 0)) held.add(task.taskId);
  }
  return { train: tasks.filter((t) => !held.has(t.taskId)), eval: tasks.filter((t) => held.has(t.taskId)) };
}

export type TaskPurpose = 'train' | 'probe' | 'eval';

export interface TaskSamplingConfig {
  seed: number;
  /** B: tasks per training step. */
  tasksPerStep: number;
  /** Share of each kind held out for evaluation. */
  heldOut: number;
  probeTasksPerKind: number;
  evalTasksPerKind: number;
}

/**
 * The tasks of a training step (B, from seed and step) or of a probe pass
 * (per kind, from the run's seed), both from the training split; or the eval
 * tasks (per kind, a fixed draw from the held-out split, the same for every
 * run, so runs compare).
 */
export function tasksFor<T extends { taskId: string; kind: string }>(
  tasks: readonly T[],
  purpose: TaskPurpose,
  config: TaskSamplingConfig,
  step: number,
): T[] {
  const split = splitTasks(tasks, config.heldOut);
  if (purpose === 'train') return drawDistinct(split.train, config.tasksPerStep, config.seed, step);
  const [pool, perKind, seedOf] =
    purpose === 'probe'
      ? [split.train, config.probeTasksPerKind, (kind: string) => hashSeed('probe', config.seed, kind)]
      : [split.eval, config.evalTasksPerKind, (kind: string) => hashSeed('eval', kind)];
  const kinds = [...new Set(pool.map((t) => t.kind))];
  return kinds.flatMap((kind) =>
    drawDistinct(
      pool.filter((t) => t.kind === kind),
      perKind,
      seedOf(kind),
      step,
    ),
  );
}
