/**
 * How a training step fills its batch beyond its first tasks
 * (`sampling.refill`, core/config.ts): dynamic sampling drops the groups
 * without signal and draws fresh tasks in their place; `matched` draws one
 * fresh task per dead base group and keeps both. Fresh tasks come from the
 * step's task stream in order (core/rl/task-sampling.ts), so every arm of a
 * seed draws the same next task.
 *
 * Determinism: the trainingStep workflow calls these functions; a change to
 * what they return for the same input changes the commands a replayed step
 * issues (docs/temporal.md).
 */
import type { SamplingConfig } from '../config';
import type { GroupSummary, TrainingGroup } from './groups';
import { isDeadGroup } from './rescue';

/** Where a step's group came from and what became of it. */
export interface DrawnGroup {
  /** Its place in the step's task stream (0..tasksPerStep-1: the first tasks). */
  index: number;
  base: GroupSummary | null;
  rescue: GroupSummary | null;
}

/** A group dynamic sampling left out of the batch: every rollout got `reward`. */
export interface DroppedGroup {
  taskId: string;
  role: 'base' | 'rescue';
  reward: number;
}

/** How many tasks a step may draw in all: `sampling.maxDraws`, else 3 x tasksPerStep (none past the first with refill `none`). */
export function maxDraws(sampling: SamplingConfig | undefined, tasksPerStep: number): number {
  if ((sampling?.refill ?? 'none') === 'none') return tasksPerStep;
  return sampling?.maxDraws ?? 3 * tasksPerStep;
}

/** Whether a group's rewards differ: GRPO gets a non-zero advantage from it. */
export function hasSignal(group: { rollouts: ReadonlyArray<{ reward: number }> }): boolean {
  return group.rollouts.some((r) => r.reward !== group.rollouts[0].reward);
}

/** The group a drawn task trains on: its rescue group when its base group was dead and rescued, else its base group. */
function finalGroup(drawn: DrawnGroup): GroupSummary | null {
  if (!drawn.base) return null;
  return isDeadGroup(drawn.base) && drawn.rescue ? drawn.rescue : drawn.base;
}

/** Whether a drawn group, now done, asks for a fresh task (the stream's next, if the step may draw one more). */
export function wantsFreshTask(drawn: DrawnGroup, refill: SamplingConfig['refill'], tasksPerStep: number): boolean {
  const group = finalGroup(drawn);
  if (group === null) return false; // a failed group is recorded as failed, not refilled
  if (refill === 'dynamic') return !hasSignal(group);
  if (refill === 'matched') return drawn.index < tasksPerStep && isDeadGroup(drawn.base!);
  return false;
}

/**
 * The batch from the assembled training groups: under dynamic sampling, the
 * groups without signal are dropped (and listed); otherwise all stay.
 */
export function keepGroupsWithSignal(
  groups: readonly TrainingGroup[],
  refill: SamplingConfig['refill'],
): { kept: TrainingGroup[]; dropped: DroppedGroup[] } {
  if (refill !== 'dynamic') return { kept: [...groups], dropped: [] };
  const kept: TrainingGroup[] = [];
  const dropped: DroppedGroup[] = [];
  for (const g of groups) {
    if (hasSignal(g)) kept.push(g);
    else dropped.push({ taskId: g.taskId, role: g.role, reward: g.rollouts[0]?.reward ?? 0 });
  }
  return { kept, dropped };
}
