/**
 * A training step's batch by reference: the step writes its training groups
 * (each rollout with its GRPO advantage) to the run store in chunks, and the
 * trainer reads them back by the step workflow's id, checking that it got
 * exactly the groups and rollouts the step wrote. A Temporal payload is
 * limited to 2 MB; a batch of 16,384 rollouts listed in trainStep's input
 * would be about 1 MB, and 28k would not fit.
 *
 * Determinism: the trainingStep workflow calls `batchGroupsOf` and
 * `batchRefOf` (docs/temporal.md).
 */
import type { TrainingGroup } from './groups';
import { UserError } from '../errors';

/** What the trainer needs of one rollout of the batch. */
export interface BatchRollout {
  harnessId: string;
  sample: number;
  advantage: number;
}

/** One group of the batch, as stored. */
export interface BatchGroup {
  taskId: string;
  role: 'base' | 'rescue';
  rollouts: BatchRollout[];
}

/** Where a step's batch is and what it holds: trainStep's input carries this instead of the batch. */
export interface TrainingBatchRef {
  /** The step workflow's id: `<run>/step-<n>`, or `<run>/step-<n>-r<k>` after k trainer restores. */
  key: string;
  groups: number;
  rollouts: number;
}

/** The batch's groups as stored: what the trainer needs of each training group. */
export function batchGroupsOf(groups: readonly TrainingGroup[]): BatchGroup[] {
  return groups.map((g) => ({
    taskId: g.taskId,
    role: g.role,
    rollouts: g.rollouts.map((r) => ({ harnessId: r.harnessId, sample: r.sample, advantage: r.advantage })),
  }));
}

export function batchRefOf(key: string, groups: readonly BatchGroup[]): TrainingBatchRef {
  return { key, groups: groups.length, rollouts: groups.reduce((n, g) => n + g.rollouts.length, 0) };
}

export class IncompleteBatchError extends UserError {
  override name = 'IncompleteBatchError';
}

/** The batch read back from the store, refused unless it holds exactly the groups and rollouts of its reference. */
export async function readTrainingBatch(
  store: { groups(runId: string, batchKey: string, count: number): Promise<BatchGroup[]> },
  runId: string,
  step: number,
  ref: TrainingBatchRef,
): Promise<BatchGroup[]> {
  const groups = await store.groups(runId, ref.key, ref.groups);
  const rollouts = groups.reduce((n, g) => n + g.rollouts.length, 0);
  if (groups.length !== ref.groups || rollouts !== ref.rollouts) {
    throw new IncompleteBatchError(
      `step ${step} of run ${runId}: the run store holds ${groups.length} groups and ${rollouts} rollouts of batch ${ref.key}, ` +
        `not the ${ref.groups} groups and ${ref.rollouts} rollouts the step wrote; run the step again (harness-s run recover ${runId})`,
    );
  }
  return groups;
}
