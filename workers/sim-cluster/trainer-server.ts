/**
 * The SIMULATED trainer: the subset of Tinker's REST API the project uses,
 * training the sim policy's parameters with a real importance-sampling
 * policy-gradient loss and Adam.
 *
 * Ops that Tinker runs as futures answer `{request_id, model_id}` at once and
 * do their work on a later tick; `retrieve_future` answers HTTP 408
 * `{type: "try_again"}` until then, and the op's result (or
 * `{error, category}`) after. Ops on one model run in submission order.
 * Request errors are HTTP 400 `{"detail": "..."}`.
 *
 * Idempotency: an `Idempotency-Key` header makes a repeat of the same route
 * and key answer the first response without doing the work again, also
 * after a restart (see checkpoints.ts for how that commits atomically);
 * except after a server fault (category `server`), when a repeat runs the op
 * again.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import { type PolicyParams, SimPolicyInputError, SimPolicyModel, addGradient } from '../../core/envs/sim/policy-model';
import type { SimWorld } from '../../core/envs/sim/world';
import { formatZodError } from '../../core/validation';
import {
  APPLIED_RETENTION,
  type FutureRecord,
  SAFE_NAME,
  type SimClusterStore,
  type TrainingModelRecord,
  samplerWeightsUri,
} from './checkpoints';
import type { SimApi, SimHttpReply, SimHttpRequest } from './server';

export const SUPPORTED_LOSS = 'importance_sampling';
const LOSS_INPUTS = ['target_tokens', 'logprobs', 'advantages'] as const;

const TensorData = z
  .object({
    data: z.array(z.number()),
    dtype: z.enum(['int64', 'float32']),
    shape: z.array(z.number().int().min(0)).nullish(),
  })
  .superRefine((tensor, ctx) => {
    if (tensor.shape && tensor.shape.reduce((a, b) => a * b, 1) !== tensor.data.length) {
      ctx.addIssue({ code: 'custom', path: ['shape'], message: `shape [${tensor.shape}] does not match ${tensor.data.length} data values` });
    }
  });

const Datum = z.object({
  model_input: z.object({
    chunks: z.array(z.object({ type: z.literal('encoded_text').default('encoded_text'), tokens: z.array(z.number().int()) })),
  }),
  loss_fn_inputs: z.record(z.string(), TensorData),
});
type Datum = z.infer<typeof Datum>;

const CreateModelBody = z.object({
  base_model: z.string(),
  lora_config: z.object({ rank: z.number().int().min(1).default(32) }).nullish(),
});

const ForwardBackwardShape = z.object({
  model_id: z.string(),
  forward_backward_input: z.object({
    data: z.array(Datum),
    loss_fn: z.string(),
    loss_fn_config: z.record(z.string(), z.unknown()).nullish(),
  }),
});
type ForwardBackwardBody = z.infer<typeof ForwardBackwardShape>;

/** Tinker's AdamParams, with its defaults. */
const AdamParams = z.object({
  learning_rate: z.number().min(0),
  beta1: z.number().min(0).lt(1).default(0.9),
  beta2: z.number().min(0).lt(1).default(0.95),
  eps: z.number().positive().default(1e-12),
  weight_decay: z.number().min(0).default(0),
  /** 0 disables clipping. */
  grad_clip_norm: z.number().min(0).default(0),
});
export type AdamParams = z.infer<typeof AdamParams>;

const OptimStepBody = z.object({ model_id: z.string(), adam_params: AdamParams });
const SaveWeightsBody = z.object({
  model_id: z.string(),
  path: z.string().regex(SAFE_NAME, 'use letters, digits, ".", "_" and "-" (e.g. "step-3")'),
});
const ModelIdBody = z.object({ model_id: z.string() });
const RetrieveFutureBody = z.object({ request_id: z.string() });

/** A failure the caller caused; its future reports category "user". */
export class SimTrainerUserError extends Error {}

export interface SimTrainerServerDeps {
  world: SimWorld;
  store: SimClusterStore;
  logger: Logger;
  /** Simulated time an op takes before it completes. */
  opDelayMs: number;
}

interface TrainingModel {
  /** Undefined until its create_model op has run. */
  state?: TrainingModelRecord;
  /** The tail of this model's op queue. */
  queue: Promise<void>;
}

interface FutureRef {
  request_id: string;
  model_id: string;
}

type FutureState = { status: 'pending' } | { status: 'done'; record: FutureRecord };

/** What an op computed: its result, and the model state to commit (every successful op commits). */
interface OpOutcome {
  result: unknown;
  next: TrainingModelRecord;
}

export class SimTrainerServer implements SimApi {
  private readonly model: SimPolicyModel;
  private readonly models = new Map<string, TrainingModel>();
  private readonly futures = new Map<string, FutureState>();
  /** `${route} ${key}` -> the first response to that key. */
  private readonly idempotent = new Map<string, FutureRef>();

  private constructor(private readonly deps: SimTrainerServerDeps) {
    this.model = new SimPolicyModel(deps.world);
  }

  /** Builds the server over the training models (and their idempotency keys) found on disk. */
  static async open(deps: SimTrainerServerDeps): Promise<SimTrainerServer> {
    const server = new SimTrainerServer(deps);
    for (const record of await deps.store.listTrainingModels()) {
      server.models.set(record.modelId, { state: record, queue: Promise.resolve() });
      for (const op of record.applied) {
        if (op.key !== null) server.idempotent.set(`${op.route} ${op.key}`, { request_id: op.requestId, model_id: record.modelId });
      }
    }
    if (server.models.size > 0) {
      deps.logger.info({ models: [...server.models.keys()] }, '[SIMULATED] trainer resumed training models from disk');
    }
    return server;
  }

  async handle(request: SimHttpRequest): Promise<SimHttpReply> {
    const key = idempotencyKey(request);
    switch (`${request.method} ${request.path}`) {
      case 'GET /api/v1/healthz':
        return { status: 200, json: { status: 'ok' } };
      case 'POST /api/v1/create_model':
        return this.createModel(request.body, key);
      case 'POST /api/v1/forward_backward':
        return this.forwardBackward(request.body, key);
      case 'POST /api/v1/optim_step':
        return this.optimStep(request.body, key);
      case 'POST /api/v1/save_weights_for_sampler':
        return this.saveWeightsForSampler(request.body, key);
      case 'POST /api/v1/get_info':
        return this.getInfo(request.body);
      case 'POST /api/v1/retrieve_future':
        return this.retrieveFuture(request.body);
      default:
        return KNOWN_PATHS.has(request.path)
          ? { status: 405, json: { detail: 'Method Not Allowed' } }
          : { status: 404, json: { detail: 'Not Found' } };
    }
  }

  badRequest(message: string): SimHttpReply {
    return { status: 400, json: { detail: message } };
  }

  /** Resolves once every op submitted so far has finished (and been persisted). */
  async drain(): Promise<void> {
    await Promise.all([...this.models.values()].map((m) => m.queue));
  }

  private createModel(rawBody: unknown, key: string | undefined): SimHttpReply {
    const parsed = CreateModelBody.safeParse(rawBody);
    if (!parsed.success) return this.badRequest(invalidBody('create_model', parsed.error));
    const repeat = this.repeatedResponse('create_model', key);
    if (repeat) return repeat;
    const base = this.deps.world.model.name;
    if (parsed.data.base_model !== base) {
      return this.badRequest(`base_model: '${parsed.data.base_model}' is not served here; this sim trainer trains '${base}'`);
    }
    const modelId = `sim-${randomUUID()}`;
    this.models.set(modelId, { queue: Promise.resolve() });
    const rank = parsed.data.lora_config?.rank ?? 32;
    return this.submit('create_model', modelId, key, async () => ({
      result: { model_id: modelId },
      next: this.freshModel(modelId, rank),
    }));
  }

  private forwardBackward(rawBody: unknown, key: string | undefined): SimHttpReply {
    const parsed = ForwardBackwardShape.safeParse(rawBody);
    if (!parsed.success) return this.badRequest(invalidBody('forward_backward', parsed.error));
    const problems = this.forwardBackwardProblems(parsed.data);
    if (problems.length > 0) return this.badRequest(`invalid request body for forward_backward:\n${problems.join('\n')}`);
    const repeat = this.repeatedResponse('forward_backward', key);
    if (repeat) return repeat;
    const { model_id: modelId, forward_backward_input: input } = parsed.data;
    if (!this.models.has(modelId)) return unknownModel(modelId);
    return this.submit('forward_backward', modelId, key, async (state) => this.accumulateGradient(state, input.data));
  }

  private optimStep(rawBody: unknown, key: string | undefined): SimHttpReply {
    const parsed = OptimStepBody.safeParse(rawBody);
    if (!parsed.success) return this.badRequest(invalidBody('optim_step', parsed.error));
    const repeat = this.repeatedResponse('optim_step', key);
    if (repeat) return repeat;
    const { model_id: modelId, adam_params: adam } = parsed.data;
    if (!this.models.has(modelId)) return unknownModel(modelId);
    return this.submit('optim_step', modelId, key, async (state) => this.applyAdam(state, adam));
  }

  private saveWeightsForSampler(rawBody: unknown, key: string | undefined): SimHttpReply {
    const parsed = SaveWeightsBody.safeParse(rawBody);
    if (!parsed.success) return this.badRequest(invalidBody('save_weights_for_sampler', parsed.error));
    const repeat = this.repeatedResponse('save_weights_for_sampler', key);
    if (repeat) return repeat;
    const { model_id: modelId, path: name } = parsed.data;
    if (!this.models.has(modelId)) return unknownModel(modelId);
    return this.submit('save_weights_for_sampler', modelId, key, async (state) => {
      // A name saved before keeps its first weights, so a retried save is harmless.
      await this.deps.store.writeSamplerWeightsOnce({
        version: 1,
        modelId,
        name,
        baseModel: state.baseModel,
        optimSteps: state.optimSteps,
        savedAt: new Date().toISOString(),
        params: state.params,
      });
      return { result: { path: samplerWeightsUri(modelId, name) }, next: state };
    });
  }

  private async getInfo(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = ModelIdBody.safeParse(rawBody);
    if (!parsed.success) return this.badRequest(invalidBody('get_info', parsed.error));
    const modelId = parsed.data.model_id;
    const model = this.models.get(modelId);
    if (!model) return unknownModel(modelId);
    await model.queue; // answer after the ops submitted before this call
    if (!model.state) return { status: 500, json: { detail: `model '${modelId}' failed to be created` } };
    return {
      status: 200,
      json: {
        model_id: modelId,
        model_data: { arch: 'sim-policy', model_name: model.state.baseModel },
        is_lora: true,
        lora_rank: model.state.loraRank,
        optim_steps: model.state.optimSteps,
      },
    };
  }

  private async retrieveFuture(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = RetrieveFutureBody.safeParse(rawBody);
    if (!parsed.success) return this.badRequest(invalidBody('retrieve_future', parsed.error));
    const requestId = parsed.data.request_id;
    const future = this.futures.get(requestId);
    if (future?.status === 'pending') return { status: 408, json: { type: 'try_again', request_id: requestId, queue_state: 'active' } };
    const record = future?.record ?? (await this.committedFutureFromDisk(requestId));
    if (!record) return { status: 404, json: { detail: `unknown or expired request_id '${requestId}'` } };
    return { status: 200, json: record.result };
  }

  /** A finished future from an earlier run of the cluster; a success whose op never committed does not count. */
  private async committedFutureFromDisk(requestId: string): Promise<FutureRecord | undefined> {
    const record = await this.deps.store.readFuture(requestId);
    if (!record) return undefined;
    const failed = typeof record.result === 'object' && record.result !== null && 'error' in record.result;
    const committed = this.models.get(record.modelId)?.state?.applied.some((op) => op.requestId === requestId);
    return failed || committed ? record : undefined;
  }

  private repeatedResponse(route: string, key: string | undefined): SimHttpReply | undefined {
    const first = key === undefined ? undefined : this.idempotent.get(`${route} ${key}`);
    return first && { status: 200, json: first };
  }

  /**
   * Answers with a future now and runs `op` on the model's queue later. The
   * op's result is written before its new state commits; a failure leaves
   * the state as it was.
   */
  private submit(
    route: string,
    modelId: string,
    key: string | undefined,
    op: (state: TrainingModelRecord) => Promise<OpOutcome>,
  ): SimHttpReply {
    const model = this.models.get(modelId)!;
    const ref: FutureRef = { request_id: `req-${randomUUID()}`, model_id: modelId };
    this.futures.set(ref.request_id, { status: 'pending' });
    if (key !== undefined) this.idempotent.set(`${route} ${key}`, ref);
    model.queue = model.queue
      .then(() => this.simulatedLatency())
      .then(() => this.runOp(route, model, ref, key, op));
    return { status: 200, json: ref };
  }

  private async runOp(
    route: string,
    model: TrainingModel,
    ref: FutureRef,
    key: string | undefined,
    op: (state: TrainingModelRecord) => Promise<OpOutcome>,
  ): Promise<void> {
    const finish = (result: unknown): FutureRecord => ({
      requestId: ref.request_id,
      modelId: ref.model_id,
      route,
      finishedAt: new Date().toISOString(),
      result,
    });
    try {
      const current = route === 'create_model' ? undefined : model.state;
      if (route !== 'create_model' && !current) throw new Error(`model '${ref.model_id}' failed to be created`);
      const outcome = await op(current!);
      const record = finish(outcome.result);
      await this.deps.store.writeFuture(record);
      const next = withAppliedOp(outcome.next, { requestId: ref.request_id, route, key: key ?? null });
      await this.deps.store.writeTrainingModel(next);
      model.state = next;
      this.futures.set(ref.request_id, { status: 'done', record });
      this.deps.logger.info({ op: route, ...ref, result: summarise(outcome.result) }, `[SIMULATED] ${route} done`);
    } catch (err) {
      const user = err instanceof SimTrainerUserError || err instanceof SimPolicyInputError;
      const record = finish({ error: (err as Error).message, category: user ? 'user' : 'server' });
      this.futures.set(ref.request_id, { status: 'done', record });
      // A server fault (a disk write failed) may pass: a retry under the same key runs the op again.
      // A bad request would fail the same way again, so its key keeps answering with this failure.
      if (!user && key !== undefined && this.idempotent.get(`${route} ${key}`) === ref) this.idempotent.delete(`${route} ${key}`);
      this.deps.logger.warn({ op: route, ...ref, err }, `[SIMULATED] ${route} failed`);
      await this.deps.store.writeFuture(record).catch((writeErr) => this.deps.logger.error({ err: writeErr }, 'cannot persist a failed future'));
    }
  }

  private simulatedLatency(): Promise<void> {
    const ms = this.deps.opDelayMs;
    return new Promise((resolve) => (ms > 0 ? setTimeout(resolve, ms) : setImmediate(resolve)));
  }

  private freshModel(modelId: string, loraRank: number): TrainingModelRecord {
    return {
      version: 1,
      modelId,
      baseModel: this.deps.world.model.name,
      loraRank,
      createdAt: new Date().toISOString(),
      params: this.model.initialParams(),
      grad: this.model.zeroParams(),
      adam: { m: this.model.zeroParams(), v: this.model.zeroParams() },
      optimSteps: 0,
      applied: [],
    };
  }

  /** Checks that need the vocabulary: one message per bad field, named by its path. */
  private forwardBackwardProblems(body: ForwardBackwardBody): string[] {
    const problems: string[] = [];
    const at = (path: string, message: string) => problems.push(`  - forward_backward_input.${path}: ${message}`);
    const { loss_fn: lossFn, data } = body.forward_backward_input;
    if (lossFn !== SUPPORTED_LOSS) at('loss_fn', `loss_fn '${lossFn}' is not supported by the sim trainer; use '${SUPPORTED_LOSS}'`);
    const tokenizer = this.model.tokenizer;
    data.forEach((datum, i) => {
      const tokens = inputTokens(datum);
      const badToken = tokens.find((id) => !tokenizer.isValidId(id));
      if (badToken !== undefined) at(`data.${i}.model_input`, `token id ${badToken} is outside the sim vocabulary (size ${tokenizer.size})`);
      for (const field of LOSS_INPUTS) {
        const tensor = datum.loss_fn_inputs[field];
        if (!tensor) at(`data.${i}.loss_fn_inputs.${field}`, `missing; ${SUPPORTED_LOSS} needs ${LOSS_INPUTS.join(', ')}`);
        else if (tensor.data.length !== tokens.length) {
          at(`data.${i}.loss_fn_inputs.${field}`, `has ${tensor.data.length} values but model_input has ${tokens.length} tokens`);
        }
      }
      const badTarget = datum.loss_fn_inputs.target_tokens?.data.find((id) => !tokenizer.isValidId(id));
      if (badTarget !== undefined) at(`data.${i}.loss_fn_inputs.target_tokens`, `token id ${badTarget} is outside the sim vocabulary`);
    });
    return problems;
  }

  /**
   * Tinker's importance-sampling loss, summed over positions and datums:
   *   loss = -sum_t exp(logp_new_t - logp_sampling_t) * A_t
   * where logp_new_t is the log-prob of target_tokens[t] after input tokens
   * [0..t]. Positions with A_t = 0 contribute nothing. The gradient
   * -ratio_t * A_t * grad(logp_new_t) is added to the model's buffer.
   */
  private accumulateGradient(state: TrainingModelRecord, data: Datum[]): OpOutcome {
    const grad = structuredClone(state.grad);
    let lossSum = 0;
    const outputs = data.map((datum, i) => {
      const tokens = inputTokens(datum);
      const targets = datum.loss_fn_inputs.target_tokens.data;
      const sampling = datum.loss_fn_inputs.logprobs.data;
      const advantages = datum.loss_fn_inputs.advantages.data;
      const logprobs = new Array<number>(tokens.length).fill(0);
      for (let t = 0; t < tokens.length; t++) {
        const modelSlot = this.model.slotAt(tokens.slice(Math.max(0, t - 1), t + 1)) !== 'end';
        if (!modelSlot && advantages[t] === 0) continue;
        const position = this.positionLogprob(state.params, tokens.slice(0, t + 1), targets[t], advantages[t] !== 0, i, t);
        if (!position) continue;
        if (modelSlot) logprobs[t] = position.logprob;
        if (advantages[t] !== 0) {
          const ratio = Math.exp(position.logprob - sampling[t]);
          lossSum -= ratio * advantages[t];
          addGradient(grad, position.grad, -ratio * advantages[t]);
        }
      }
      return { logprobs: { data: logprobs, dtype: 'float32', shape: [tokens.length] } };
    });
    return {
      result: { loss_fn_output_type: 'TensorData', loss_fn_outputs: outputs, metrics: { 'loss:sum': lossSum } },
      next: { ...state, grad },
    };
  }

  /**
   * log p(target | prefix) under the current params. A position the sim
   * policy cannot have produced is an error only when it carries advantage;
   * otherwise (prompt and observation tokens) it is skipped.
   */
  private positionLogprob(params: PolicyParams, prefix: number[], target: number, trained: boolean, datum: number, t: number) {
    const where = `datum ${datum}, position ${t}`;
    try {
      const position = this.model.logprobAndGrad(params, prefix, target);
      if (position.logprob !== -Infinity) return position;
      if (!trained) return undefined;
      const token = this.model.tokenizer.token(target);
      throw new SimTrainerUserError(`${where}: target token '${token}' can never follow this prefix, yet it has a nonzero advantage`);
    } catch (err) {
      if (!(err instanceof SimPolicyInputError)) throw err;
      if (!trained) return undefined;
      throw new SimTrainerUserError(`${where}: ${err.message}`);
    }
  }

  private applyAdam(state: TrainingModelRecord, adam: AdamParams): OpOutcome {
    const step = state.optimSteps + 1;
    const updated = adamStep(
      {
        params: this.model.flatten(state.params),
        grad: this.model.flatten(state.grad),
        m: this.model.flatten(state.adam.m),
        v: this.model.flatten(state.adam.v),
      },
      step,
      adam,
    );
    return {
      result: { metrics: { 'optim/step': step, grad_norm: updated.gradNorm } },
      next: {
        ...state,
        params: this.model.unflatten(updated.params),
        adam: { m: this.model.unflatten(updated.m), v: this.model.unflatten(updated.v) },
        grad: this.model.zeroParams(),
        optimSteps: step,
      },
    };
  }
}

export interface AdamVectors {
  params: number[];
  grad: number[];
  m: number[];
  v: number[];
}

/**
 * One AdamW step (PyTorch's formulation, bias-corrected, decoupled weight
 * decay), t = step (1-based):
 *   g <- g * min(1, clip / ||g||)            when grad_clip_norm > 0
 *   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
 *   p <- p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) - lr * wd * p
 * gradNorm is ||g|| before clipping.
 */
export function adamStep(state: AdamVectors, step: number, adam: AdamParams): AdamVectors & { gradNorm: number } {
  const gradNorm = Math.sqrt(state.grad.reduce((sum, g) => sum + g * g, 0));
  const clip = adam.grad_clip_norm > 0 && gradNorm > adam.grad_clip_norm ? adam.grad_clip_norm / gradNorm : 1;
  const { learning_rate: lr, beta1, beta2, eps, weight_decay: wd } = adam;
  const m = state.m.map((mi, i) => beta1 * mi + (1 - beta1) * state.grad[i] * clip);
  const v = state.v.map((vi, i) => beta2 * vi + (1 - beta2) * (state.grad[i] * clip) ** 2);
  const params = state.params.map((p, i) => {
    const mHat = m[i] / (1 - beta1 ** step);
    const vHat = v[i] / (1 - beta2 ** step);
    return p - lr * (mHat / (Math.sqrt(vHat) + eps)) - lr * wd * p;
  });
  return { params, grad: state.grad, m, v, gradNorm };
}

const KNOWN_PATHS = new Set(
  ['healthz', 'create_model', 'forward_backward', 'optim_step', 'save_weights_for_sampler', 'get_info', 'retrieve_future'].map(
    (op) => `/api/v1/${op}`,
  ),
);

function inputTokens(datum: Datum): number[] {
  return datum.model_input.chunks.flatMap((chunk) => chunk.tokens);
}

function withAppliedOp(state: TrainingModelRecord, op: TrainingModelRecord['applied'][number]): TrainingModelRecord {
  return { ...state, applied: [...state.applied, op].slice(-APPLIED_RETENTION) };
}

function idempotencyKey(request: SimHttpRequest): string | undefined {
  const value = request.headers['idempotency-key'];
  return Array.isArray(value) ? value[0] : value;
}

function unknownModel(modelId: string): SimHttpReply {
  return { status: 404, json: { detail: `unknown model_id '${modelId}'; create it with create_model` } };
}

function invalidBody(op: string, error: z.ZodError): string {
  return `invalid request body for ${op}:\n${formatZodError(error)}`;
}

/** The small part of a result worth a log line (not per-token logprobs). */
function summarise(result: unknown): unknown {
  if (typeof result === 'object' && result !== null && 'metrics' in result) return (result as { metrics: unknown }).metrics;
  return result;
}
