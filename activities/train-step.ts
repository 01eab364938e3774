/**
 * The trainStep activity (task queue harness-s-trainer): one optimizer step on
 * a Tinker-compatible trainer (core/rl/trainer-step.ts). It heartbeats on a
 * clock for as long as it runs, also while a trainer request is in flight
 * (a trainer may hold a poll for minutes), and stops when cancelled.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { RunConfig } from '../core/config';
import type { LogprobMismatch } from '../core/rl/logprob-mismatch';
import { TinkerClient, TrainerError } from '../core/rl/tinker/client';
import type { TrainerSessions } from '../core/rl/tinker/sessions';
import { MissingTrajectoryError, mismatchOf, runTrainerStep, type TrainerStepInput } from '../core/rl/trainer-step';
import type { RunStore } from '../core/store/run-store';
import { apiKeyOf, MissingSecretError } from '../core/secrets';
import { withHeartbeatClock } from './heartbeat';


export interface TrainStepInput {
  runId: string;
  step: number;
  groups: TrainerStepInput['groups'];
}

export interface TrainStepResult {
  policyVersion: string;
  samplerPath: string;
  datums: number;
  responseTokens: number;
  metrics: Record<string, number>;
  /** Trainer vs sampler log-probs of the trained tokens; null when nothing was trained. */
  logprobMismatch: LogprobMismatch | null;
}

/** A TinkerClient for a run's trainer, cancelled with the current activity. */
export function trainerClient(config: RunConfig, signal?: AbortSignal): TinkerClient {
  return new TinkerClient({ baseUrl: config.trainer.baseUrl, apiKey: apiKeyOf(config.trainer, 'trainer'), pollSeconds: config.trainer.pollSeconds, signal });
}

/** Trainer errors a user must fix fail the run at once; the rest are retried. */
export function asTrainerFailure(err: unknown): never {
  if (err instanceof TrainerError && err.category === 'user') throw ApplicationFailure.nonRetryable(err.message, 'TrainerRequestRefused');
  if (err instanceof MissingTrajectoryError || err instanceof MissingSecretError) throw ApplicationFailure.nonRetryable(err.message, err.name);
  throw err;
}

export function createTrainStep(deps: {
  store: RunStore;
  logger: Logger;
  trainerSessions: TrainerSessions;
  loadRun(runId: string): Promise<{ config: RunConfig }>;
}) {
  return async function trainStep(input: TrainStepInput): Promise<TrainStepResult> {
    const { config } = await deps.loadRun(input.runId);
    const context = Context.current();
    // Before the clock starts: a missing secret fails at once.
    trainerClient(config);
    let phase = 'starting';
    try {
      const record = await withHeartbeatClock(
        () => ({ step: input.step, phase }),
        () =>
          runTrainerStep(
            {
              trainer: trainerClient(config, context.cancellationSignal),
              sessions: deps.trainerSessions.for(config.trainer.baseUrl, apiKeyOf(config.trainer, 'trainer')),
              store: deps.store,
              logger: deps.logger,
              onProgress: (what) => {
                phase = what;
                context.heartbeat({ step: input.step, phase });
              },
            },
            { ...input, config },
          ),
      );
      const { policyVersion, samplerPath, datums, responseTokens, metrics } = record;
      return { policyVersion, samplerPath, datums, responseTokens, metrics, logprobMismatch: mismatchOf(record) };
    } catch (err) {
      return asTrainerFailure(err);
    }
  };
}
