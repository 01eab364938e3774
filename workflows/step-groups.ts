/**
 * One task of a training step played: its base group and, when that group is
 * dead, the router's choice and a rescue group, started at once without
 * waiting for the step's other groups. trainingStep plays its tasks with it
 * when the step fits one history, and each trainingStepSlice its slice's
 * tasks when the step is split.
 *
 * Workflow code: deterministic, no I/O.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { RunConfig } from '../core/config';
import type { TaskRef } from '../core/harness/task';
import type { GroupSummary } from '../core/rl/groups';
import type { WorkerReplicaViews } from '../core/policy/replicas';
import type { RolloutGroupResult } from '../activities';
import { failureCounts, isDeadGroup, planRescueGroup } from '../core/rl/rescue';
import type { FailedGroup } from '../core/rl/step-summary';
import { controlActivityOptions, rolloutActivityOptions } from './activity-options';
import { groupOrFailure } from './failures';

export interface TaskPlayerOptions {
  runId: string;
  step: number;
  config: RunConfig;
  policyVersion: string;
  profileVersion: number;
  baseHarnessId: string;
  /** A task that fails for good is recorded (`onFailed`) and gives null; otherwise its failure is thrown (histories before `failed-groups`). */
  keepsFailedGroups: boolean;
  onFailed(failed: FailedGroup): void;
  /** A task's base group has ended (done or failed). */
  onBaseDone(): void;
  onRescueStarted(): void;
  /** A rollout worker's view of the inference replicas, when a group's result carries one. */
  onReplicaViews?(views: WorkerReplicaViews): void;
}

export interface PlayedTask {
  base: GroupSummary | null;
  rescue: GroupSummary | null;
}

/** A function that plays one task of the step: its base group and, when it is dead, its rescue group. */
export function taskPlayer(options: TaskPlayerOptions): (task: TaskRef) => Promise<PlayedTask> {
  const { runId, step, config, policyVersion, profileVersion, baseHarnessId } = options;
  const control = proxyActivities<Activities>(controlActivityOptions(config.retry));
  const rollout = proxyActivities<Activities>(rolloutActivityOptions(config.retry));
  const G = config.rollout.groupSize;

  /** A group's activity; with failed groups kept, a task that fails for good is recorded and gives null. */
  const group = async (taskId: string, role: 'base' | 'rescue', run: () => Promise<RolloutGroupResult>): Promise<GroupSummary | null> => {
    // The worker's view of the replicas goes to the step's status; the group goes on without it.
    const summary = async (): Promise<GroupSummary> => {
      const { replicas, ...played } = await run();
      if (replicas) options.onReplicaViews?.(replicas);
      return played;
    };
    if (!options.keepsFailedGroups) return summary();
    const outcome = await groupOrFailure(summary);
    if ('group' in outcome) return outcome.group;
    options.onFailed({ taskId, role, reason: outcome.failed });
    return null;
  };

  return async (task) => {
    const base = await group(task.taskId, 'base', () =>
      rollout.runRolloutGroup({
        runId,
        phase: 'train',
        step,
        taskId: task.taskId,
        role: 'base',
        policyVersion,
        plan: [{ harnessId: baseHarnessId, samples: G }],
      }),
    );
    options.onBaseDone();
    if (!base || !config.rescue.enabled || !isDeadGroup(base)) return { base, rescue: null };
    const decision = await control.chooseRescueHarnesses({
      runId,
      step,
      profileVersion,
      group: { taskId: task.taskId, kind: task.kind, failureCounts: failureCounts(base) },
    });
    if (decision.chosen.length === 0) return { base, rescue: null };
    options.onRescueStarted();
    const rescue = await group(task.taskId, 'rescue', () =>
      rollout.runRolloutGroup({
        runId,
        phase: 'train',
        step,
        taskId: task.taskId,
        role: 'rescue',
        policyVersion,
        plan: planRescueGroup(decision.chosen, G),
      }),
    );
    return { base, rescue };
  };
}
