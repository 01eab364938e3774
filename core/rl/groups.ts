/**
 * Rollout groups and Complementary Harness Rescue: a group whose G base
 * attempts all fail is replaced by a rescue group of the same size, k sibling
 * harnesses x G/k rollouts, each trajectory keeping the harness it came from.
 */
import { computeGrpoAdvantages, isDeadGroup } from './grpo';

export interface RolloutSummary {
  harnessId: string;
  sample: number;
  reward: number;
  success: boolean;
  failureType: string | null;
  turns: number;
  tokens: number;
}

export interface GroupSummary {
  taskId: string;
  kind: string;
  role: 'base' | 'rescue';
  rollouts: RolloutSummary[];
}

/** How many rollouts each chosen harness runs so the group keeps size G. */
export function planRescueGroup(harnessIds: readonly string[], groupSize: number): Array<{ harnessId: string; samples: number }> {
  if (harnessIds.length === 0) return [];
  const each = Math.floor(groupSize / harnessIds.length);
  const extra = groupSize % harnessIds.length;
  return harnessIds.map((harnessId, i) => ({ harnessId, samples: each + (i < extra ? 1 : 0) })).filter((p) => p.samples > 0);
}

export function groupIsDead(group: GroupSummary): boolean {
  return isDeadGroup(group.rollouts.map((r) => r.success));
}

export function failureCounts(group: GroupSummary): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of group.rollouts) {
    if (r.success) continue;
    const type = r.failureType ?? 'unknown';
    counts[type] = (counts[type] ?? 0) + 1;
  }
  return counts;
}

export interface TrainingGroup {
  taskId: string;
  kind: string;
  role: 'base' | 'rescue';
  rollouts: Array<RolloutSummary & { advantage: number }>;
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
    const group = groupIsDead(base) ? (rescueByTask.get(base.taskId) ?? base) : base;
    const advantages = computeGrpoAdvantages(group.rollouts.map((r) => r.reward), normalizeByStd);
    return {
      taskId: group.taskId,
      kind: group.kind,
      role: group.role,
      rollouts: group.rollouts.map((r, i) => ({ ...r, advantage: advantages[i] })),
    };
  });
}
