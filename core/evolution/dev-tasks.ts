/**
 * The dev split an evolution diagnoses and validates on: per kind, a fixed
 * draw from the training split, so it never holds a task a run evaluates on
 * (given the same `heldOut` as the run's eval.heldOut).
 */
import { hashSeed } from '../random';
import { drawDistinct, splitTasks } from '../rl/task-sampling';

export function devTasksFor<T extends { taskId: string; kind: string }>(
  tasks: readonly T[],
  dev: { tasksPerKind: number; heldOut: number },
  seed: number,
): Array<{ taskId: string; kind: string }> {
  const { train } = splitTasks(tasks, dev.heldOut);
  const kinds = [...new Set(train.map((t) => t.kind))];
  return kinds.flatMap((kind) =>
    drawDistinct(
      train.filter((t) => t.kind === kind),
      dev.tasksPerKind,
      hashSeed('dev', seed, kind),
      0,
    ).map(({ taskId }) => ({ taskId, kind })),
  );
}
