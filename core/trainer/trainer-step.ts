/**
 * One training step on a Tinker-compatible trainer, exactly once:
 *
 * 1. the run's trainer model (created on its first step, in this worker's
 *    session, and recorded with that session so it is kept alive);
 * 2. forward_backward (`importance_sampling`) over the batch's Datums in
 *    chunks, then optim_step with the run's Adam parameters, then
 *    save_weights_for_sampler named after the step;
 * 3. a forward pass over the publish probe, so each inference server can be
 *    checked against the trainer's log-probs under the step's weights.
 *
 * Every op carries the seq_id the run store's ledger gave it (trainer-ops.ts),
 * so a retried step gets the same futures and applies nothing twice; an op
 * the trainer failed is sent anew; a step the store already records is not
 * redone. Along the way the trainer's
 * log-probs of the sampled tokens are compared with the sampler's
 * (logprob-mismatch.ts).
 */
import type { Logger } from 'pino';
import type { RunConfig } from '../config';
import { type AdapterProbe, probeSequence } from '../policy/adapter-probe';
import { policyVersionName } from '../policy/publisher';
import type { TokenSample } from '../policy/trajectory';
import type { RunStore, TrainerStepRecord } from '../store/run-store';
import { buildDatum, countResponseTokens, type Datum, datumTargetMask } from '../rl/datums';
import { logprobMismatch, type LogprobMismatch } from '../rl/logprob-mismatch';
import { type TinkerClient, TrainerError } from './tinker/client';
import type { TinkerSessionKeeper } from './tinker/sessions';
import { type OpLedgerDeps, runLedgerOp, STEP_OPS, stepCheckpointName } from './trainer-ops';
import { checkpointDue, DEFAULT_KEEP, saveTrainingCheckpoint } from './training-checkpoints';
import { UserError } from '../errors';

/** Datums per forward_backward request; gradients accumulate until optim_step. */
export const DATUMS_PER_REQUEST = 128;

export interface TrainerStepInput {
  runId: string;
  step: number;
  config: RunConfig;
  groups: Array<{ taskId: string; rollouts: Array<{ harnessId: string; sample: number; advantage: number }> }>;
}

export interface TrainerStepDeps {
  trainer: TinkerClient;
  sessions: TinkerSessionKeeper;
  store: Pick<
    RunStore,
    | 'getRun'
    | 'claimTrainerModel'
    | 'tokenSamples'
    | 'trainerOpSeq'
    | 'failTrainerOp'
    | 'recordTrainerStep'
    | 'trainerStep'
    | 'recordCheckpoint'
    | 'checkpoints'
    | 'markCheckpointDeleted'
  >;
  logger: Logger;
  /** Progress, for heartbeats. */
  onProgress?(what: string): void;
}

export class MissingTrajectoryError extends UserError {
  override name = 'MissingTrajectoryError';
}

/** The mismatch of a trainer step, read back from its stored metrics. */
export function mismatchOf(record: Pick<TrainerStepRecord, 'metrics'>): LogprobMismatch | null {
  const m = record.metrics;
  if (m['logprob_mismatch/tokens'] === undefined) return null;
  return {
    tokens: m['logprob_mismatch/tokens'],
    meanAbsDiff: m['logprob_mismatch/mean_abs_diff'],
    ratioMean: m['logprob_mismatch/ratio_mean'],
    ratioStd: m['logprob_mismatch/ratio_std'],
    ratioMin: m['logprob_mismatch/ratio_min'],
    ratioMax: m['logprob_mismatch/ratio_max'],
  };
}

/** The trainer metric that holds the step's forward_backward tokens. */
export const TRAINER_TOKENS_METRIC = 'spend/trainer_tokens';

export async function runTrainerStep(deps: TrainerStepDeps, input: TrainerStepInput): Promise<TrainerStepRecord> {
  const { store, trainer, logger } = deps;
  const { runId, step, config } = input;
  const done = await store.trainerStep(runId, step);
  if (done) return done;

  const modelId = await trainerModel(deps, input);
  const progress = (what: string) => deps.onProgress?.(what);

  const tokenSamples = await store.tokenSamples(
    runId,
    'train',
    step,
    input.groups.map((g) => g.taskId),
  );
  const batch = input.groups.flatMap((g) =>
    g.rollouts.map((r) => {
      const samples = tokenSamples.get(`${g.taskId}/${r.harnessId}/${r.sample}`);
      if (!samples) throw new MissingTrajectoryError(`step ${step}: trajectory ${g.taskId}/${r.harnessId}/${r.sample} is not in the store`);
      return { samples, advantage: r.advantage };
    }),
  );
  const responseTokens = countResponseTokens(batch.flatMap((b) => b.samples));
  const trained = batch.filter((b) => b.advantage !== 0).flatMap((b) => b.samples.map((sample) => ({ sample, advantage: b.advantage })));
  const datums: Datum[] = trained.map(({ sample, advantage }) => buildDatum(sample, advantage, Math.max(1, responseTokens)));

  const chunks = Math.ceil(datums.length / DATUMS_PER_REQUEST);
  const ledger: OpLedgerDeps = { store, runId, step, modelId };

  const metrics: Record<string, number> = {};
  const trainerLogprobs: number[][] = [];
  for (let c = 0; c < chunks; c++) {
    progress(`forward_backward ${c + 1}/${chunks}`);
    const result = await runLedgerOp(ledger, STEP_OPS.forwardBackward(c), (seqId) =>
      trainer.forwardBackward({
        modelId,
        seqId,
        lossFn: 'importance_sampling',
        data: datums.slice(c * DATUMS_PER_REQUEST, (c + 1) * DATUMS_PER_REQUEST),
      }),
    );
    for (const [name, value] of Object.entries(result.metrics)) metrics[name] = (metrics[name] ?? 0) + value;
    trainerLogprobs.push(...result.loss_fn_outputs.map((output) => output.logprobs?.data ?? []));
  }
  const mismatch = logprobMismatch(
    trained.map(({ sample }, i) => ({
      trainer: trainerLogprobs[i] ?? [],
      sampler: datums[i].loss_fn_inputs.logprobs.data,
      mask: datumTargetMask(sample),
    })),
  );
  if (chunks > 0) {
    progress('optim_step');
    const { adam } = config.trainer;
    const adamParams = {
      learning_rate: adam.learningRate,
      beta1: adam.beta1,
      beta2: adam.beta2,
      eps: adam.eps,
      weight_decay: adam.weightDecay,
      grad_clip_norm: adam.gradClipNorm,
    };
    Object.assign(
      metrics,
      await runLedgerOp(ledger, STEP_OPS.optimStep, (seqId) => trainer.optimStep({ modelId, seqId, adam: adamParams })),
    );
  }
  progress('save_weights_for_sampler');
  const samplerPath = await runLedgerOp(
    ledger,
    STEP_OPS.saveWeights,
    (seqId, name) => trainer.saveWeightsForSampler({ modelId, seqId, name: name ?? stepCheckpointName(step) }),
    stepCheckpointName(step),
  );
  progress('probe forward');
  const probe = await probeTrainer(trainer, ledger, firstSample(input, tokenSamples));
  const policyVersion = policyVersionName(runId, modelId, step);
  if (checkpointDue(step, config)) {
    progress('save_weights');
    await saveTrainingCheckpoint({ trainer, store, logger, ledger, keep: config.checkpoint?.keep ?? DEFAULT_KEEP }, policyVersion);
  }
  // What the trainer was given to process: the model_input tokens of every datum (spend, as compare reports it).
  metrics[TRAINER_TOKENS_METRIC] = datums.reduce((n, d) => n + d.model_input.chunks.reduce((m, c) => m + c.tokens.length, 0), 0);
  if (mismatch) {
    Object.assign(metrics, {
      'logprob_mismatch/tokens': mismatch.tokens,
      'logprob_mismatch/mean_abs_diff': mismatch.meanAbsDiff,
      'logprob_mismatch/ratio_mean': mismatch.ratioMean,
      'logprob_mismatch/ratio_std': mismatch.ratioStd,
      'logprob_mismatch/ratio_min': mismatch.ratioMin,
      'logprob_mismatch/ratio_max': mismatch.ratioMax,
    });
  }
  const record: TrainerStepRecord = {
    runId,
    step,
    modelId,
    samplerPath,
    policyVersion,
    datums: datums.length,
    responseTokens,
    metrics: finiteMetrics(metrics, (dropped) =>
      logger.warn({ runId, step, dropped }, 'trainer metrics that are not finite numbers are left out'),
    ),
    probe,
  };
  await store.recordTrainerStep(record);
  logger.info({ runId, step, modelId, datums: datums.length, responseTokens, samplerPath, mismatch }, 'trainer step done');
  // A concurrent attempt may have recorded first: the stored record is the step's.
  return (await store.trainerStep(runId, step)) ?? record;
}

/** The run's trainer model: the recorded one (its session kept alive), or a new one claimed for the run. */
async function trainerModel(deps: TrainerStepDeps, input: TrainerStepInput): Promise<string> {
  const { store, trainer, sessions, logger } = deps;
  const { runId, config } = input;
  const run = await store.getRun(runId);
  if (run?.trainerModelId) {
    if (run.trainerSessionId) sessions.keepAlive(run.trainerSessionId);
    return run.trainerModelId;
  }
  deps.onProgress?.('create_model');
  const { modelId, sessionId } = await createTrainerModel(deps, runId, config);
  const claimed = await store.claimTrainerModel(runId, modelId, sessionId);
  if (claimed.modelId !== modelId) {
    // Another attempt of this step created the run's model first: free ours.
    await trainer
      .unloadModel(modelId)
      .catch((err: unknown) => logger.warn({ runId, modelId, err: (err as Error).message }, 'could not unload a duplicate trainer model'));
    if (claimed.sessionId) sessions.keepAlive(claimed.sessionId);
  }
  logger.info({ runId, modelId: claimed.modelId, sessionId: claimed.sessionId }, 'trainer model ready');
  return claimed.modelId;
}

/** A new LoRA training model for the run, in this worker's session (a new session when the trainer forgot ours). */
export async function createTrainerModel(
  deps: Pick<TrainerStepDeps, 'trainer' | 'sessions'>,
  runId: string,
  config: RunConfig,
): Promise<{ modelId: string; sessionId: string }> {
  const { trainer, sessions } = deps;
  const create = async (sessionId: string) =>
    trainer.createModel({
      sessionId,
      modelSeqId: sessions.nextModelSeqId(),
      baseModel: config.policy.model,
      lora: {
        rank: config.trainer.loraRank,
        seed: config.trainer.lora.seed,
        train_attn: config.trainer.lora.trainAttn,
        train_mlp: config.trainer.lora.trainMlp,
        train_unembed: config.trainer.lora.trainUnembed,
      },
      userMetadata: { harness_s_run: runId },
    });
  let sessionId = await sessions.sessionId();
  let modelId: string;
  try {
    modelId = await create(sessionId);
  } catch (err) {
    // The session expired under us (the trainer restarted or forgot it): open a new one and try once more.
    if (!(err instanceof TrainerError && /session not found/i.test(err.message))) throw err;
    sessions.forget(sessionId);
    sessionId = await sessions.sessionId();
    modelId = await create(sessionId);
  }
  return { modelId, sessionId };
}

/**
 * The metrics that are finite numbers: JSON (the run store, workflow
 * histories) has no NaN or infinity, and a diverged loss must not make the
 * step's record unreadable.
 */
function finiteMetrics(metrics: Record<string, number>, onDropped: (names: string[]) => void): Record<string, number> {
  const dropped = Object.keys(metrics).filter((name) => !Number.isFinite(metrics[name]));
  if (dropped.length > 0) onDropped(dropped);
  return Object.fromEntries(Object.entries(metrics).filter(([, value]) => Number.isFinite(value)));
}

/** The step's first trajectory sample in batch order: the probe sequence. */
function firstSample(input: TrainerStepInput, tokenSamples: Map<string, TokenSample[]>): TokenSample | null {
  for (const g of input.groups) {
    for (const r of g.rollouts) {
      const sample = tokenSamples.get(`${g.taskId}/${r.harnessId}/${r.sample}`)?.find((s) => s.responseIds.length > 0);
      if (sample) return sample;
    }
  }
  return null;
}

/** The trainer's log-probs of the probe sequence under the step's weights (a forward pass). */
async function probeTrainer(trainer: TinkerClient, ledger: OpLedgerDeps, sample: TokenSample | null): Promise<AdapterProbe | null> {
  if (!sample) return null;
  const { tokens, positions } = probeSequence(sample);
  if (positions.length === 0 || tokens.length < 2) return null;
  const result = await runLedgerOp(ledger, STEP_OPS.probeForward, (seqId) =>
    trainer.forwardBackward({
      modelId: ledger.modelId,
      seqId,
      lossFn: 'cross_entropy',
      forwardOnly: true,
      data: [
        {
          model_input: { chunks: [{ type: 'encoded_text', tokens: tokens.slice(0, -1) }] },
          loss_fn_inputs: { target_tokens: { data: tokens.slice(1), dtype: 'int64', shape: [tokens.length - 1] } },
        },
      ],
    }),
  );
  const logprobs = result.loss_fn_outputs[0]?.logprobs?.data;
  if (!logprobs || logprobs.length !== tokens.length - 1) {
    throw new TrainerError(
      `trainer: the probe forward pass returned ${logprobs?.length ?? 0} log-probs for ${tokens.length - 1} targets`,
      'server',
    );
  }
  return { tokens, positions, logprobs: positions.map((i) => logprobs[i - 1]) };
}
