/**
 * Complementary Harness Rescue: a group whose G base attempts all fail (a
 * dead group: equal rewards, zero GRPO advantage, no learning signal) goes to
 * the router, and is replaced by a rescue group of the same size: the k
 * chosen sibling harnesses x G/k rollouts, each trajectory keeping the
 * harness it came from.
 *
 * Determinism: the trainingStep workflow calls these functions, so they are
 * part of its replay contract. A change to what they return for the same
 * input (which group is dead, how a rescue group is planned or assembled)
 * changes the commands a replayed step issues; guard such a change with
 * `patched()` in the workflow (docs/temporal.md).
 */
import type { GroupSummary, TrainingGroup } from './groups';
import { computeGrpoAdvantages } from './grpo';

/** Whether no rollout of a group succeeded (and it has rollouts). */
export function allFailed(successes: readonly boolean[]): boolean {
  return successes.length > 0 && successes.every((s) => !s);
}

/** A group is dead when no rollout succeeded: all rewards equal, zero advantage. */
export function isDeadGroup(group: GroupSummary): boolean {
  return allFailed(group.rollouts.map((r) => r.success));
}

/** A dead group's failures by type: what the router matches against the profiles. */
export function failureCounts(group: GroupSummary): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of group.rollouts) {
    if (r.success) continue;
    const type = r.failureType ?? 'unknown';
    counts[type] = (counts[type] ?? 0) + 1;
  }
  return counts;
}

/** How many rollouts each chosen harness runs so the group keeps size G. */
export function planRescueGroup(harnessIds: readonly string[], groupSize: number): Array<{ harnessId: string; samples: number }> {
  if (harnessIds.length === 0) return [];
  const each = Math.floor(groupSize / harnessIds.length);
  const extra = groupSize % harnessIds.length;
  return harnessIds.map((harnessId, i) => ({ harnessId, samples: each + (i < extra ? 1 : 0) })).filter((p) => p.samples > 0);
}

/**
 * The batch's groups: each dead base group that has a rescue group is replaced
 * by it; every other group stays. Advantages are GRPO's, within each group.
 */
export function assembleTrainingGroups(
  baseGroups: readonly GroupSummary[],
  rescueGroups: readonly GroupSummary[],
  normalizeByStd: boolean,
): TrainingGroup[] {
  const rescueByTask = new Map(rescueGroups.map((g) => [g.taskId, g]));
  return baseGroups.map((base) => {
    const group = isDeadGroup(base) ? (rescueByTask.get(base.taskId) ?? base) : base;
    const advantages = computeGrpoAdvantages(
      group.rollouts.map((r) => r.reward),
      normalizeByStd,
    );
    return {
      taskId: group.taskId,
      kind: group.kind,
      role: group.role,
      rollouts: group.rollouts.map((r, i) => ({ ...r, advantage: advantages[i] })),
    };
  });
}
