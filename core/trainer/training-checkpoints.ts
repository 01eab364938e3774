/**
 * Training-state checkpoints: the weights and the optimizer state of a run's
 * trainer model (the Tinker API's save_weights; the SDK's save_state), saved
 * after every `checkpoint.every`-th step and after the last one, recorded in
 * the run store with their step, and pruned to the last `checkpoint.keep`.
 * A run restores from them when the trainer loses its model, and a fork
 * starts from one (trainer-restore.ts).
 *
 * Exactly once as every trainer op: the save goes through the step's ledger
 * under the checkpoint name `state-<step>`; a retried save of that name finds
 * the checkpoint (409, then listed) and a failed one is saved again under a
 * new name.
 */
import type { Logger } from 'pino';
import type { RunConfig } from '../config';
import type { RunStore } from '../store/run-store';
import type { TinkerClient } from './tinker/client';
import { type OpLedgerDeps, runLedgerOp, STEP_OPS } from './trainer-ops';

/** checkpoint.keep when a run's config predates checkpoints. */
export const DEFAULT_KEEP = 3;
/** checkpoint.every when a run's config predates checkpoints. */
export const DEFAULT_EVERY = 5;

/** The checkpoint name of a step's training state (first attempt). */
export function trainingCheckpointName(step: number): string {
  return `state-${step}`;
}

/**
 * Whether step `step` (0-based) ends with a checkpoint: after every
 * `every`-th step (steps every-1, 2*every-1, ...) and after the run's last
 * step; `every` 0 saves after the last step only.
 */
export function checkpointDue(step: number, config: Pick<RunConfig, 'steps'> & { checkpoint?: Partial<RunConfig['checkpoint']> }): boolean {
  const every = config.checkpoint?.every ?? DEFAULT_EVERY;
  return step === config.steps - 1 || (every > 0 && (step + 1) % every === 0);
}

/** The checkpoints to delete so that the newest `keep` (by step) remain. */
export function checkpointsBeyondKeep<T extends { step: number }>(live: readonly T[], keep: number): T[] {
  const newestFirst = [...live].sort((a, b) => b.step - a.step);
  return newestFirst.slice(keep);
}

export interface SaveCheckpointDeps {
  trainer: TinkerClient;
  store: Pick<RunStore, 'trainerOpSeq' | 'failTrainerOp' | 'recordCheckpoint' | 'checkpoints' | 'markCheckpointDeleted'>;
  logger: Logger;
  ledger: OpLedgerDeps;
  keep: number;
}

/** Saves the step's training state, records it, and deletes the checkpoints beyond `keep`. */
export async function saveTrainingCheckpoint(deps: SaveCheckpointDeps, policyVersion: string): Promise<string> {
  const { trainer, store, logger, ledger } = deps;
  const { runId, step, modelId } = ledger;
  let name = trainingCheckpointName(step);
  const path = await runLedgerOp(
    ledger,
    STEP_OPS.saveState,
    (seqId, checkpointName) => {
      name = checkpointName ?? name;
      return trainer.saveWeights({ modelId, seqId, name });
    },
    trainingCheckpointName(step),
  );
  await store.recordCheckpoint({ runId, step, modelId, name, path, policyVersion });
  logger.info({ runId, step, modelId, path }, 'training checkpoint saved');
  await pruneCheckpoints(deps);
  return path;
}

/**
 * Deletes a run's checkpoints beyond the newest `keep`, on the trainer and
 * then in the store. Best effort: a trainer that cannot delete one now leaves
 * it listed, and a later save tries again.
 */
async function pruneCheckpoints(deps: SaveCheckpointDeps): Promise<void> {
  const { trainer, store, logger, ledger, keep } = deps;
  for (const old of checkpointsBeyondKeep(await store.checkpoints(ledger.runId), keep)) {
    try {
      await trainer.deleteTrainingCheckpoint(old.modelId, old.name);
      await store.markCheckpointDeleted(ledger.runId, old.modelId, old.name);
      logger.info({ runId: ledger.runId, step: old.step, path: old.path }, 'old training checkpoint deleted');
    } catch (err) {
      logger.warn(
        { runId: ledger.runId, path: old.path, err: (err as Error).message },
        'could not delete an old training checkpoint; a later save tries again',
      );
    }
  }
}
