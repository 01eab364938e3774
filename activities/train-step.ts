/**
 * The trainStep activity (task queue harness-s-trainer): one optimizer step on
 * a Tinker-compatible trainer (core/rl/trainer-step.ts). It heartbeats on a
 * clock for as long as it runs, also while a trainer request is in flight
 * (a trainer may hold a poll for minutes), and stops when cancelled.
 */
import { Context } from '@temporalio/activity';
import type { LogprobMismatch } from '../core/rl/logprob-mismatch';
import { mismatchOf, runTrainerStep, type TrainerStepInput } from '../core/rl/trainer-step';
import { defaultClients } from './clients';
import { withHeartbeatClock } from './heartbeat';
import type { ActivityDeps, RunContext } from './run-context';


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

export function createTrainStep(deps: ActivityDeps, context: RunContext) {
  const clients = deps.clients ?? defaultClients;
  return async function trainStep(input: TrainStepInput): Promise<TrainStepResult> {
    const { config } = await context.loadRun(input.runId);
    const activity = Context.current();
    let phase = 'starting';
    // Before the clock starts: a missing secret fails at once.
    const trainer = clients.trainer(config, activity.cancellationSignal);
    const sessions = deps.trainerSessions.for(config.trainer.baseUrl, clients.trainerApiKey(config));
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
          { ...input, config },
        ),
    );
    const { policyVersion, samplerPath, datums, responseTokens, metrics } = record;
    return { policyVersion, samplerPath, datums, responseTokens, metrics, logprobMismatch: mismatchOf(record) };
  };
}
