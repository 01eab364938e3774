/**
 * The trainer's activities (task queue harness-s-trainer): trainStep, one
 * optimizer step on a Tinker-compatible trainer (core/trainer/trainer-step.ts),
 * and restoreTrainer, the run's model made anew from a checkpoint when the
 * trainer lost it, or a fork's first model (core/trainer/trainer-restore.ts).
 * Both heartbeat on a clock for as long as they run, also while a trainer
 * request is in flight (a trainer may hold a poll for minutes), and stop when
 * cancelled.
 */
import { Context } from '@temporalio/activity';
import type { LogprobMismatch } from '../core/rl/logprob-mismatch';
import { countTrainerRestore } from '../core/metrics';
import { type RestoreInput, restoreTrainerModel } from '../core/trainer/trainer-restore';
import { mismatchOf, runTrainerStep, TRAINER_TOKENS_METRIC, type TrainerStepInput } from '../core/trainer/trainer-step';
import { readTrainingBatch, type TrainingBatchRef } from '../core/rl/training-batch';
import { defaultClients } from './clients';
import { withHeartbeatClock } from './heartbeat';
import type { ActivityDeps, RunContext } from './run-context';

/**
 * A step's batch by reference (the run store holds it: storeTrainingBatch), or, in histories recorded
 * before that, listed in the input.
 */
export type TrainStepInput = { runId: string; step: number } & ({ batch: TrainingBatchRef } | { groups: TrainerStepInput['groups'] });

export interface TrainStepResult {
  policyVersion: string;
  samplerPath: string;
  datums: number;
  responseTokens: number;
  /** The model_input tokens of every datum the trainer processed. */
  trainerTokens: number;
  metrics: Record<string, number>;
  /** Trainer vs sampler log-probs of the trained tokens; null when nothing was trained. */
  logprobMismatch: LogprobMismatch | null;
}

export function createTrainStep(deps: ActivityDeps, context: RunContext) {
  const clients = deps.clients ?? defaultClients;
  return async function trainStep(input: TrainStepInput): Promise<TrainStepResult> {
    const { config } = await context.loadRun(input.runId);
    const activity = Context.current();
    let phase = 'starting';
    // Before the clock starts: a missing secret fails at once.
    const trainer = clients.trainer(config, activity.cancellationSignal);
    const sessions = deps.trainerSessions.for(config.trainer.baseUrl, clients.trainerApiKey(config));
    const groups =
      'batch' in input ? await readTrainingBatch(deps.store.trainingBatches, input.runId, input.step, input.batch) : input.groups;
    const record = await withHeartbeatClock(
      () => ({ step: input.step, phase }),
      () =>
        runTrainerStep(
          {
            trainer,
            sessions,
            store: deps.store,
            logger: deps.logger,
            onProgress: (what) => {
              phase = what;
              activity.heartbeat({ step: input.step, phase });
            },
          },
          { runId: input.runId, step: input.step, groups, config },
        ),
    );
    const { policyVersion, samplerPath, datums, responseTokens, metrics } = record;
    return {
      policyVersion,
      samplerPath,
      datums,
      responseTokens,
      trainerTokens: metrics[TRAINER_TOKENS_METRIC] ?? 0,
      metrics,
      logprobMismatch: mismatchOf(record),
    };
  };
}

/** What restoreTrainer did, small enough for the workflow's history. */
export type RestoreTrainerResult =
  | {
      restore: number;
      kind: 'checkpoint' | 'base' | 'fork';
      /** The step whose state was loaded; null when the model started over from the base. */
      fromStep: number | null;
      atStep: number;
      /** The step the run goes on from. */
      nextStep: number;
      policyVersion: string;
      /** The loaded state's sampler weights, to publish; null from the base (rollouts use the base model). */
      samplerPath: string | null;
      /** When the restore completed (ISO 8601, the run store's clock). */
      at: string;
      reason: string;
    }
  | { needsDecision: string };

export function createRestoreTrainer(deps: ActivityDeps, context: RunContext) {
  const clients = deps.clients ?? defaultClients;
  return async function restoreTrainer(input: RestoreInput): Promise<RestoreTrainerResult> {
    const { config } = await context.loadRun(input.runId);
    const activity = Context.current();
    let phase = 'starting';
    const trainer = clients.trainer(config, activity.cancellationSignal);
    const sessions = deps.trainerSessions.for(config.trainer.baseUrl, clients.trainerApiKey(config));
    const outcome = await withHeartbeatClock(
      () => ({ atStep: input.atStep, phase }),
      () =>
        restoreTrainerModel(
          {
            trainer,
            sessions,
            store: deps.store,
            logger: deps.logger,
            onProgress: (what) => {
              phase = what;
              activity.heartbeat({ atStep: input.atStep, phase });
            },
          },
          input,
          config,
        ),
    );
    if ('needsDecision' in outcome) return outcome;
    const r = outcome.restored;
    // Counted by the attempt that completed it (a retry finds it done and counts nothing).
    if (outcome.completedNow) countTrainerRestore(r.kind);
    return {
      restore: r.restore,
      kind: r.kind,
      fromStep: r.fromStep,
      atStep: r.atStep,
      nextStep: r.fromStep === null ? 0 : r.fromStep + 1,
      policyVersion: r.policyVersion!,
      samplerPath: r.samplerPath,
      at: (r.completedAt ?? r.createdAt).toISOString(),
      reason: r.reason,
    };
  };
}
