/**
 * The trainStep activity (task queue harness-s-trainer): one optimizer step on
 * a Tinker-compatible trainer. Every trainer call carries an idempotency key
 * per (run, step, call), and a step the store already records is not redone.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { RunConfig } from '../core/config';
import { policyVersionName } from '../core/policy/publisher';
import { buildDatum, countResponseTokens, type Datum } from '../core/rl/datums';
import { TinkerClient, TrainerError } from '../core/rl/tinker-client';
import type { RunStore } from '../core/store/run-store';

/** Datums per forward_backward request; gradients accumulate until optim_step. */
const DATUMS_PER_REQUEST = 128;

export interface TrainStepInput {
  runId: string;
  step: number;
  groups: Array<{ taskId: string; rollouts: Array<{ harnessId: string; sample: number; advantage: number }> }>;
}

export interface TrainStepResult {
  policyVersion: string;
  samplerPath: string;
  datums: number;
  responseTokens: number;
  metrics: Record<string, number>;
}

export function createTrainStep(deps: {
  store: RunStore;
  logger: Logger;
  loadRun(runId: string): Promise<{ config: RunConfig }>;
}) {
  return async function trainStep(input: TrainStepInput): Promise<TrainStepResult> {
    const { store, logger } = deps;
    const { runId, step } = input;
    const done = await store.trainerStep(runId, step);
    if (done) return { policyVersion: done.policyVersion, samplerPath: done.samplerPath, datums: done.datums, responseTokens: done.responseTokens, metrics: done.metrics };

    const { config } = await deps.loadRun(runId);
    const key = (call: string) => `${runId}/step-${step}/${call}`;
    const trainer = new TinkerClient({
      baseUrl: config.trainer.baseUrl,
      apiKey: config.trainer.apiKey,
      pollSeconds: config.trainer.pollSeconds,
      onPoll: () => Context.current().heartbeat({ step }),
    });
    try {
      const run = await store.getRun(runId);
      const modelId =
        run?.trainerModelId ??
        (await store.claimTrainerModelId(runId, await trainer.createModel(config.policy.model, config.trainer.loraRank, `${runId}/create_model`)));

      const tokenSamples = await store.tokenSamples(runId, 'train', step, input.groups.map((g) => g.taskId));
      const batch = input.groups.flatMap((g) =>
        g.rollouts.map((r) => {
          const samples = tokenSamples.get(`${g.taskId}/${r.harnessId}/${r.sample}`);
          if (!samples) throw ApplicationFailure.nonRetryable(`step ${step}: trajectory ${g.taskId}/${r.harnessId}/${r.sample} is not in the store`, 'MissingTrajectory');
          return { samples, advantage: r.advantage };
        }),
      );
      const responseTokens = countResponseTokens(batch.flatMap((b) => b.samples));
      const datums: Datum[] = batch
        .filter((b) => b.advantage !== 0)
        .flatMap((b) => b.samples.map((s) => buildDatum(s, b.advantage, Math.max(1, responseTokens))));

      const metrics: Record<string, number> = {};
      for (let i = 0; i < datums.length; i += DATUMS_PER_REQUEST) {
        const result = await trainer.forwardBackward(modelId, datums.slice(i, i + DATUMS_PER_REQUEST), key(`forward_backward-${i / DATUMS_PER_REQUEST}`));
        for (const [name, value] of Object.entries(result.metrics ?? {})) metrics[name] = (metrics[name] ?? 0) + value;
      }
      if (datums.length > 0) {
        const { adam } = config.trainer;
        const optim = await trainer.optimStep(modelId, { learning_rate: adam.learningRate, beta1: adam.beta1, beta2: adam.beta2, eps: adam.eps }, key('optim_step'));
        Object.assign(metrics, optim.metrics ?? {});
      }
      const samplerPath = await trainer.saveWeightsForSampler(modelId, `step-${step}`, key('save_weights_for_sampler'));
      const policyVersion = policyVersionName(runId, step);
      await store.recordTrainerStep({ runId, step, modelId, samplerPath, policyVersion, datums: datums.length, responseTokens, metrics });
      logger.info({ runId, step, datums: datums.length, responseTokens, metrics }, 'trainer step done');
      return { policyVersion, samplerPath, datums: datums.length, responseTokens, metrics };
    } catch (err) {
      if (err instanceof TrainerError && err.category === 'user') throw ApplicationFailure.nonRetryable(err.message, err.name);
      throw err;
    }
  };
}
