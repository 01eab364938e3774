/**
 * storeTrainingBatch (task queue harness-s-control): writes one chunk of a
 * training step's batch to the run store, so trainStep takes the batch by
 * reference (core/rl/training-batch.ts). Idempotent: the chunk's rows are
 * keyed by the step workflow's id and their index in the batch.
 */
import type { BatchGroup } from '../core/rl/training-batch';
import type { ActivityDeps } from './run-context';

export interface StoreTrainingBatchInput {
  runId: string;
  step: number;
  /** The step workflow's id: `<run>/step-<n>`, or `<run>/step-<n>-r<k>`. */
  batchKey: string;
  /** The chunk's first group's index in the batch. */
  first: number;
  groups: BatchGroup[];
}

export function createTrainingBatchActivities(deps: Pick<ActivityDeps, 'store'>) {
  return {
    async storeTrainingBatch(input: StoreTrainingBatchInput): Promise<{ groups: number }> {
      await deps.store.trainingBatches.writeGroups(input);
      return { groups: input.groups.length };
    },
  };
}
