/** Which tasks a step, a probe pass or an evaluation runs (core/rl/task-sampling.ts). */
import type { TaskRef } from '../core/harness/task';
import { tasksFor, type TaskPurpose } from '../core/rl/task-sampling';
import type { RunContext } from './run-context';

export function createTaskActivities(context: RunContext) {
  return {
    /**
     * The tasks of a training step (B, from seed and step) or of a probe pass
     * (per kind), both from the training split; or the eval tasks (per kind, a
     * fixed draw from the held-out split, the same for every run).
     */
    async sampleTasks(input: { runId: string; purpose: TaskPurpose; step: number; count?: number }): Promise<TaskRef[]> {
      const { config, env } = await context.loadRun(input.runId);
      return tasksFor(
        env.listTasks(),
        input.purpose,
        {
          seed: config.seed,
          // A training step's stream: its first tasksPerStep tasks, or (with a refill) as many as it may draw, the first ones the same.
          tasksPerStep: input.purpose === 'train' && input.count !== undefined ? input.count : config.rollout.tasksPerStep,
          heldOut: config.eval.heldOut,
          probeTasksPerKind: config.router.probeTasksPerKind,
          evalTasksPerKind: config.eval.tasksPerKind,
        },
        input.step,
      );
    },

    /** Task refs (id and kind) for task ids, e.g. recent dead groups to probe. */
    async describeTasks(input: { runId: string; taskIds: string[] }): Promise<TaskRef[]> {
      const { env } = await context.loadRun(input.runId);
      const byId = new Map(env.listTasks().map((t) => [t.taskId, t]));
      return input.taskIds.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
    },
  };
}
