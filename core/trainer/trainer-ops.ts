/**
 * The trainer ops of one training step, by name, and the rule that makes each
 * exactly-once.
 *
 * Tinker makes a retried op exactly-once by the per-model `seq_id` in its
 * body: the same seq_id with the same body returns the same future. Each op
 * of a step is given its seq_id once, in the run store's trainer_ops ledger,
 * before it is first sent, so a retried activity (or a new worker after a
 * crash) sends every op under the seq_id it had: the trainer answers with the
 * op's future, never a second update. Seq ids grow per model (one past the
 * highest the model has used). A trainer answers a used seq_id with the same
 * future also when that future failed; so an op whose future failed (it was
 * not applied) is marked failed in the ledger and gets a new seq_id when the
 * step is retried, and a failed checkpoint save also a new checkpoint name.
 *
 * The order within a step: forward_backward chunk 0..C-1, optim_step (when
 * there is data), save_weights_for_sampler, the forward pass of the publish
 * probe (when there is a probe), save_weights (when a checkpoint is due).
 * A restored model's first ops are load_weights and save_weights_for_sampler,
 * in the ledger under the step whose checkpoint they load.
 */
import type { RunStore } from '../store/run-store';
import { TrainerError } from './tinker/client';

export const STEP_OPS = {
  forwardBackward: (chunk: number) => `forward_backward/${chunk}`,
  optimStep: 'optim_step',
  saveWeights: 'save_weights_for_sampler',
  probeForward: 'forward/probe',
  /** The training state (weights and optimizer state), every checkpoint.every steps. */
  saveState: 'save_weights',
  /** A restored or forked model's first op: the training state of a checkpoint. */
  loadState: 'load_weights',
} as const;

/** The checkpoint name of a step's sampler weights (first attempt). */
export function stepCheckpointName(step: number): string {
  return `step-${step}`;
}

export interface OpLedgerDeps {
  store: Pick<RunStore, 'trainerOpSeq' | 'failTrainerOp'>;
  runId: string;
  step: number;
  modelId: string;
}

/**
 * Runs one op of the step under its ledger seq_id (and checkpoint name); an
 * op whose future failed on the trainer is marked failed before the error
 * goes on, so the retry sends it anew.
 */
export async function runLedgerOp<T>(
  deps: OpLedgerDeps,
  op: string,
  send: (seqId: number, checkpointName: string | null) => Promise<T>,
  checkpointName?: string,
): Promise<T> {
  const { seqId, checkpointName: name } = await deps.store.trainerOpSeq({
    runId: deps.runId,
    step: deps.step,
    op,
    modelId: deps.modelId,
    checkpointName,
  });
  try {
    return await send(seqId, name);
  } catch (err) {
    if (err instanceof TrainerError && err.opFailed) await deps.store.failTrainerOp(deps.modelId, seqId, err.message);
    throw err;
  }
}
