/**
 * Diagnose: the base harness's rollouts on the dev tasks, grouped by failure
 * type and handed to the directions that type calls for. A task is a target
 * of a direction when at least half of its base rollouts failed and its most
 * common failure type maps to that direction; a task the base solved on every
 * rollout may be drawn into the regression sample (what a candidate breaks).
 * Pure: the workflow calls it.
 */
import type { FailureType } from '../policy/trajectory';
import type { FailureDirections, SiblingDirection } from './failure-directions';

/** One (harness, task) group of rollouts as an activity reports it. */
export interface EvolutionGroup {
  phase: string;
  candidateId: string;
  taskId: string;
  kind: string;
  rollouts: number;
  successes: number;
  failures: Partial<Record<FailureType, number>>;
}

export interface TargetTask {
  taskId: string;
  kind: string;
  /** The most common failure type of the base's rollouts on it. */
  failureType: FailureType;
}

export interface Diagnosis {
  /** Per direction asked for: the tasks it targets (possibly none). */
  targets: Partial<Record<SiblingDirection, TargetTask[]>>;
  /** Tasks the base solved on every rollout. */
  solved: Array<{ taskId: string; kind: string }>;
  /** kind -> failure type -> base rollouts that failed so. */
  failures: Record<string, Partial<Record<FailureType, number>>>;
  /** Base success over all dev rollouts. */
  baseSuccess: number;
}

const FAILURE_ORDER: readonly FailureType[] = ['format_error', 'execution_error', 'wrong_answer', 'turn_limit', 'policy_error'];

/** The most common failure type of a group (ties: the order above); null when nothing failed. */
export function dominantFailure(group: Pick<EvolutionGroup, 'failures'>): FailureType | null {
  let best: FailureType | null = null;
  for (const type of FAILURE_ORDER) {
    const n = group.failures[type] ?? 0;
    if (n > 0 && (best === null || n > (group.failures[best] ?? 0))) best = type;
  }
  return best;
}

export function diagnoseFailures(
  groups: readonly EvolutionGroup[],
  mapping: FailureDirections,
  directions: readonly SiblingDirection[],
): Diagnosis {
  const targets: Diagnosis['targets'] = Object.fromEntries(directions.map((d) => [d, [] as TargetTask[]]));
  const failures: Diagnosis['failures'] = {};
  const solved: Diagnosis['solved'] = [];
  let rollouts = 0;
  let successes = 0;
  for (const group of groups) {
    rollouts += group.rollouts;
    successes += group.successes;
    const byType = (failures[group.kind] ??= {});
    for (const [type, n] of Object.entries(group.failures) as Array<[FailureType, number]>) byType[type] = (byType[type] ?? 0) + n;
    if (group.rollouts > 0 && group.successes === group.rollouts) solved.push({ taskId: group.taskId, kind: group.kind });
    const failed = group.rollouts - group.successes;
    const type = dominantFailure(group);
    if (type === null || failed * 2 < group.rollouts) continue;
    for (const direction of mapping[type]) targets[direction]?.push({ taskId: group.taskId, kind: group.kind, failureType: type });
  }
  return { targets, solved, failures, baseSuccess: rollouts ? successes / rollouts : 0 };
}

/** Every task some direction targets, once each, in first-seen order. */
export function allTargets(diagnosis: Diagnosis): TargetTask[] {
  const seen = new Map<string, TargetTask>();
  for (const list of Object.values(diagnosis.targets)) for (const t of list ?? []) if (!seen.has(t.taskId)) seen.set(t.taskId, t);
  return [...seen.values()];
}
