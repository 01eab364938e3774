/**
 * What one evaluation found: on the eval split, the policy under (a) the base
 * harness and (b) Rank-1 routing, each with the same number of executor
 * rollouts per task. Small enough for a workflow history.
 */
import type { RolloutSummary } from './groups';

export interface ArmResult {
  rollouts: number;
  successRate: number;
  byKind: Record<string, { rollouts: number; successRate: number }>;
}

export interface EvaluationSummary {
  /** Training steps done before this evaluation (0: the base policy). */
  afterSteps: number;
  policyVersion: string;
  profileVersion: number;
  tasks: number;
  rolloutsPerTask: number;
  base: ArmResult;
  rank1: ArmResult;
  /** Task kind -> the harness Rank-1 routing sent its tasks to. */
  rank1Routes: Record<string, string>;
}

export interface EvaluatedTask {
  taskId: string;
  kind: string;
  base: readonly RolloutSummary[];
  rank1: readonly RolloutSummary[];
}

function armResult(tasks: readonly EvaluatedTask[], pick: (t: EvaluatedTask) => readonly RolloutSummary[]): ArmResult {
  const byKind: ArmResult['byKind'] = {};
  let rollouts = 0;
  let successes = 0;
  for (const kind of [...new Set(tasks.map((t) => t.kind))].sort()) {
    const mine = tasks.filter((t) => t.kind === kind).flatMap(pick);
    const ok = mine.filter((r) => r.success).length;
    byKind[kind] = { rollouts: mine.length, successRate: mine.length ? ok / mine.length : 0 };
    rollouts += mine.length;
    successes += ok;
  }
  return { rollouts, successRate: rollouts ? successes / rollouts : 0, byKind };
}

export function summarizeEvaluation(args: {
  afterSteps: number;
  policyVersion: string;
  profileVersion: number;
  rolloutsPerTask: number;
  rank1Routes: Record<string, string>;
  tasks: readonly EvaluatedTask[];
}): EvaluationSummary {
  for (const task of args.tasks) {
    if (task.base.length !== args.rolloutsPerTask || task.rank1.length !== args.rolloutsPerTask) {
      throw new Error(
        `evaluation of ${task.taskId}: ${task.base.length} base and ${task.rank1.length} Rank-1 rollouts, expected ${args.rolloutsPerTask} each`,
      );
    }
  }
  return {
    afterSteps: args.afterSteps,
    policyVersion: args.policyVersion,
    profileVersion: args.profileVersion,
    tasks: args.tasks.length,
    rolloutsPerTask: args.rolloutsPerTask,
    base: armResult(args.tasks, (t) => t.base),
    rank1: armResult(args.tasks, (t) => t.rank1),
    rank1Routes: args.rank1Routes,
  };
}
