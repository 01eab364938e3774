/**
 * A run's trainer model made anew:
 *
 * - a restore, when the trainer lost the run's model (it restarted, a node
 *   died, its session expired): a new model loads the latest training
 *   checkpoint with its optimizer state (`load_weights`), or, with none yet,
 *   starts over from the base model; the run then re-runs the steps after the
 *   loaded one, and what those steps stored is marked superseded;
 * - a fork's first model: loaded from its parent's checkpoint at or before a
 *   step (`harness-s run fork`).
 *
 * The loaded state's sampler weights are saved under the new model, so the
 * restored policy can be published (and checked by the loaded step's probe)
 * before any rollout uses it.
 *
 * Exactly once per restore number: the restore's row is written before the
 * new model loads, with that model's id; a retried restore frees that model
 * (a trainer takes load_weights only as a model's first request, so a load
 * whose outcome is unknown cannot be sent again) and loads into a new one.
 * A completed restore is returned as it was.
 */
import type { Logger } from 'pino';
import type { RunConfig } from '../config';
import { UserError } from '../errors';
import { FAILURE_TYPES } from '../failure-types';
import { policyVersionName } from '../policy/publisher';
import type { CheckpointRecord, RestoreKind, RestoreRecord, RunStore } from '../store/run-store';
import { type TinkerClient, TrainerError } from './tinker/client';
import type { TinkerSessionKeeper } from './tinker/sessions';
import { runLedgerOp, STEP_OPS, stepCheckpointName } from './trainer-ops';
import { createTrainerModel } from './trainer-step';

export interface RestoreInput {
  runId: string;
  /** The step that found the model gone; a fork's first step. */
  atStep: number;
  reason: string;
  /** The model the trainer lost, which identifies the restore (null for a fork; for a restore, the run's current model when unknown). */
  lostModelId: string | null;
  /** With no checkpoint: start over from the base (true), or do nothing and answer `needsDecision` (false). */
  allowBase: boolean;
  /** A fork: the parent run and the latest step whose checkpoint it may start from. */
  fork?: { parentRunId: string; atOrBeforeStep: number };
}

/** `completedNow`: this call completed the restore (false when an earlier attempt had). */
export type RestoreOutcome = { restored: RestoreRecord; completedNow: boolean } | { needsDecision: string };

export interface RestoreDeps {
  trainer: TinkerClient;
  sessions: TinkerSessionKeeper;
  store: Pick<
    RunStore,
    | 'getRun'
    | 'findRestore'
    | 'startRestore'
    | 'setRestoreModel'
    | 'completeRestore'
    | 'checkpoints'
    | 'markCheckpointDeleted'
    | 'trainerOpSeq'
    | 'failTrainerOp'
  >;
  logger: Logger;
  onProgress?(what: string): void;
}

export class NoCheckpointError extends UserError {
  override name = FAILURE_TYPES.NoCheckpointError;
}

export async function restoreTrainerModel(deps: RestoreDeps, input: RestoreInput, config: RunConfig): Promise<RestoreOutcome> {
  const { store, trainer, logger } = deps;
  const { runId } = input;
  const progress = (what: string) => deps.onProgress?.(what);
  const lostModelId = input.fork ? null : (input.lostModelId ?? (await store.getRun(runId))?.trainerModelId ?? null);
  let row = await store.findRestore(runId, lostModelId);
  if (row?.status === 'done') return { restored: row, completedNow: false };

  if (!row) {
    progress('finding the checkpoint');
    const source = await loadableCheckpoint(deps, input);
    if (!source && input.fork) {
      const listed = (await store.checkpoints(input.fork.parentRunId)).map((c) => c.step);
      throw new NoCheckpointError(
        `run ${input.fork.parentRunId} has no training checkpoint at or before step ${input.fork.atOrBeforeStep} ` +
          `(${listed.length ? `its checkpoints are at steps ${listed.join(', ')}` : 'it has none: checkpoint.every sets how often a run saves one'})`,
      );
    }
    if (!source && !input.allowBase) return { needsDecision: input.reason };
    const kind: RestoreKind = input.fork ? 'fork' : source ? 'checkpoint' : 'base';
    row = await store.startRestore({
      runId,
      kind,
      atStep: input.atStep,
      fromRunId: source?.runId ?? null,
      fromStep: source?.step ?? null,
      checkpointPath: source?.path ?? null,
      lostModelId,
      reason:
        source || input.fork ? input.reason : `${input.reason}; the run had no checkpoint yet, so its model starts over from the base`,
    });
  }

  const { restore } = row;
  if (row.modelId) {
    // An earlier attempt created this model and may have sent it the load: free it and load anew.
    await trainer
      .unloadModel(row.modelId)
      .catch((err: unknown) =>
        logger.warn(
          { runId, restore, modelId: row!.modelId, err: (err as Error).message },
          'could not free the model of an interrupted restore',
        ),
      );
  }
  progress('create_model');
  const { modelId, sessionId } = await createTrainerModel(deps, runId, config);
  await store.setRestoreModel(runId, restore, modelId, sessionId);

  let policyVersion = config.policy.model;
  let samplerPath: string | null = null;
  if (row.checkpointPath !== null && row.fromStep !== null) {
    const fromStep = row.fromStep;
    const ledger = { store, runId, step: fromStep, modelId };
    progress(`load_weights ${row.checkpointPath}`);
    await runLedgerOp(ledger, STEP_OPS.loadState, (seqId) =>
      trainer.loadWeights({ modelId, seqId, path: row!.checkpointPath!, optimizer: true }),
    ).catch((err: unknown) => {
      // A load sent again (its future vanished) is refused as no longer the model's first request, while the
      // first may have been applied or not: the activity's retry frees this model and loads into a new one.
      if (err instanceof TrainerError && /LoadWeights is not permitted/i.test(err.message)) throw new TrainerError(err.message, 'server');
      throw err;
    });
    progress('save_weights_for_sampler');
    samplerPath = await runLedgerOp(
      ledger,
      STEP_OPS.saveWeights,
      (seqId, name) => trainer.saveWeightsForSampler({ modelId, seqId, name: name ?? stepCheckpointName(fromStep) }),
      stepCheckpointName(fromStep),
    );
    policyVersion = policyVersionName(runId, modelId, fromStep);
  }
  const done = await store.completeRestore({ runId, restore, modelId, sessionId, policyVersion, samplerPath });
  logger.info(
    {
      runId,
      restore,
      kind: done.kind,
      fromStep: done.fromStep,
      atStep: done.atStep,
      lostModelId: done.lostModelId,
      modelId,
      policyVersion,
    },
    done.kind === 'fork' ? 'fork loaded from its parent checkpoint' : 'trainer model restored',
  );
  return { restored: done, completedNow: true };
}

/**
 * The newest checkpoint the trainer still has: the run's own (a restore) or
 * the parent's at or before the fork step. One the trainer no longer knows is
 * marked deleted and the one before it is tried.
 */
async function loadableCheckpoint(deps: RestoreDeps, input: RestoreInput): Promise<CheckpointRecord | null> {
  const { store, trainer, logger } = deps;
  const sourceRun = input.fork?.parentRunId ?? input.runId;
  const limit = input.fork?.atOrBeforeStep ?? Number.POSITIVE_INFINITY;
  const candidates = (await store.checkpoints(sourceRun)).filter((c) => c.step <= limit).reverse();
  for (const candidate of candidates) {
    try {
      await trainer.weightsInfo(candidate.path);
      return candidate;
    } catch (err) {
      if (!(err instanceof TrainerError && err.category === 'user')) throw err;
      logger.warn(
        { runId: input.runId, path: candidate.path, err: err.message },
        'the trainer no longer has this checkpoint; trying the one before it',
      );
      await store.markCheckpointDeleted(sourceRun, candidate.modelId, candidate.name);
    }
  }
  return null;
}
