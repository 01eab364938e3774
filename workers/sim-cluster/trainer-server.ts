/**
 * The SIMULATED trainer: the Tinker REST API as the official tinker SDK
 * (>= 0.25) speaks it and SkyRL's Tinker server answers it, training the sim
 * policy's parameters with a real importance-sampling policy-gradient loss
 * and Adam (learning-rule.ts).
 *
 * - Sessions: create_session, session_heartbeat; a session silent for
 *   `sessionTimeoutMs` expires and its models are unloaded.
 * - create_model needs a live session_id; forward_backward takes protobuf
 *   bodies only (HTTP 415 otherwise); forward/forward_backward and sample
 *   results are protobuf, everything else JSON.
 * - Exactly-once: an op with a seq_id sent again with the same body gets the
 *   same future (also after a restart); a different body under a used seq_id
 *   is HTTP 409; a failed op's seq_id keeps answering with its failed future
 *   (as SkyRL's), so a caller sends the op again under a new seq_id.
 *   save_weights_for_sampler of a name that exists is HTTP 409, also when its
 *   save failed (its archive then answers 500 "Checkpoint creation failed").
 * - Futures: retrieve_future holds the request up to `longPollMs`, then 408;
 *   a failed op is HTTP 400 `{detail}` (the caller's error) or 200
 *   `{error, category: "server"}` (a server fault; the op was not applied).
 * - Checkpoints: listed (completed ones of both types, "training" and
 *   "sampler", also of a model no longer loaded), and sampler weights
 *   downloadable as an archive (302 to the download).
 * - Training state: save_weights (params and Adam moments, apart from the
 *   live models; a name that exists, pending or failed is 409), load_weights
 *   into a model as its first request (400 otherwise, as SkyRL; 404 for an
 *   unknown checkpoint, 425 pending, 500 failed), weights_info from the
 *   checkpoint alone, and DELETE of a training checkpoint (204; 404 unknown,
 *   425 pending). A model unknown here (its file deleted before a restart) is
 *   404 "Model not found" to every op, as SkyRL after a restart without it.
 * Request errors are FastAPI's shapes: 422 `{detail: [{loc, msg}]}`, else `{detail}`.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import type { Logger } from 'pino';
import { z } from 'zod';
import { type PolicyParams, SimPolicyInputError, SimPolicyModel, seededRandom } from '../../core/envs/sim/policy-model';
import { END } from '../../core/envs/sim/tokenizer';
import type { SimWorld } from '../../core/envs/sim/world';
import {
  AdamParams,
  CHECKPOINT_NAME,
  CreateModelRequest,
  CreateSessionRequest,
  decodeForwardBackwardRequest,
  encodeForwardBackwardResult,
  encodeSampleResult,
  type ForwardBackwardBody,
  parseTinkerPath,
  PROTOBUF_CONTENT_TYPE,
  RetrieveFutureRequest,
  SessionHeartbeatRequest,
  TinkerWireError,
  LoadWeightsRequest,
  SaveWeightsRequest,
  UnloadModelRequest,
  WeightsInfoRequest,
} from '../../core/rl/tinker/wire';
import {
  APPLIED_RETENTION,
  type AppliedOp,
  type FutureRecord,
  hashBody,
  SAFE_NAME,
  type SessionRecord,
  type SimClusterStore,
  type TrainingModelRecord,
  samplerWeightsUri,
} from './checkpoints';
import { adamStep, datumTokens, forwardLogprobs, importanceSamplingStep, SimTrainerUserError, SUPPORTED_LOSSES } from './learning-rule';
import type { SimApi, SimHttpReply, SimHttpRequest } from './http';
import type { LatencyModel } from './latency';

export { SimTrainerUserError } from './learning-rule';

/** The sim trainer's limit, as SkyRL's max_lora_rank. */
export const SIM_MAX_LORA_RANK = 64;

const OptimStepBody = z.object({
  model_id: z.string().min(1),
  adam_params: AdamParams,
  seq_id: z.number().int().positive().nullish(),
});

const SaveWeightsForSamplerBody = z
  .object({
    model_id: z.string().min(1),
    path: z.string().regex(CHECKPOINT_NAME, 'use letters, digits, "_" and "-" (e.g. "step-3")').nullish(),
    sampling_session_seq_id: z.number().int().min(0).nullish(),
    seq_id: z.number().int().positive().nullish(),
  })
  .refine((b) => b.path || (b.sampling_session_seq_id != null && b.seq_id != null), {
    message: "either 'path' or both 'sampling_session_seq_id' and 'seq_id' must be provided",
  });

const ModelIdBody = z.object({ model_id: z.string().min(1) });

const CreateSamplingSessionBody = z
  .object({
    session_id: z.string().min(1),
    sampling_session_seq_id: z.number().int().min(0),
    base_model: z.string().nullish(),
    model_path: z.string().nullish(),
  })
  .refine((b) => (b.base_model == null) !== (b.model_path == null), { message: 'exactly one of base_model or model_path must be provided' });

const SampleBody = z
  .object({
    num_samples: z.number().int().min(1).default(1),
    prompt: z.object({ chunks: z.array(z.object({ type: z.literal('encoded_text').optional(), tokens: z.array(z.number().int()) })) }),
    sampling_params: z.object({
      max_tokens: z.number().int().positive({ message: 'max_tokens is currently required' }),
      seed: z.number().int().nullish(),
      temperature: z.number().min(0).default(1),
    }),
    base_model: z.string().nullish(),
    model_path: z.string().nullish(),
    sampling_session_id: z.string().nullish(),
    seq_id: z.number().int().nullish(),
    prompt_logprobs: z.boolean().nullish(),
  })
  .refine((b) => b.sampling_session_id != null || (b.base_model == null) !== (b.model_path == null), {
    message: "when 'sampling_session_id' is not provided, exactly one of 'base_model' or 'model_path' must be provided",
  });


export interface SimTrainerServerDeps {
  world: SimWorld;
  store: SimClusterStore;
  logger: Logger;
  /** Simulated time an op takes before it completes. */
  opDelayMs: number;
  /** SIMULATED GPU time of the ops it times (forward_backward, optim_step, saves), in place of opDelayMs. */
  latency?: LatencyModel;
  /** How long retrieve_future holds a request for a pending future before answering 408. */
  longPollMs?: number;
  /** A session without a heartbeat for this long expires and its models are unloaded (SkyRL: 300 s). */
  sessionTimeoutMs?: number;
}

interface TrainingModel {
  /** Undefined until its create_model op has run. */
  state?: TrainingModelRecord;
  sessionId: string;
  /** The tail of this model's op queue. */
  queue: Promise<void>;
  /** seq_id -> the op first sent under it; also pending ones. */
  seqs: Map<number, { requestId: string; route: string; bodyHash: string }>;
  /** Requests sent to it besides create_model: load_weights is only its first. */
  requests: number;
}

type FutureState = { status: 'pending'; waiters: Array<() => void> } | { status: 'done'; record: FutureRecord };

interface OpOutcome {
  result: FutureRecord['result'];
  /** The model state to commit; undefined when the op changes nothing (forward, sample). */
  next?: TrainingModelRecord;
}

export class SimTrainerServer implements SimApi {
  private readonly model: SimPolicyModel;
  private readonly models = new Map<string, TrainingModel>();
  private readonly futures = new Map<string, FutureState>();
  private sessions: Record<string, SessionRecord> = {};
  private readonly samplingSessions = new Map<string, { sessionId: string; basePath: string | null }>();
  /** (model, checkpoint name) pairs whose save is in flight: a second save of the name is 409 already. */
  private readonly pendingCheckpoints = new Set<string>();
  /** Checkpoints whose save failed, with the reason (kept in memory: a restart forgets them). */
  private readonly failedCheckpoints = new Map<string, string>();
  private sweeper?: NodeJS.Timeout;
  private readonly longPollMs: number;
  private readonly sessionTimeoutMs: number;
  private readonly baseParams: PolicyParams;

  private constructor(private readonly deps: SimTrainerServerDeps) {
    this.model = new SimPolicyModel(deps.world);
    this.baseParams = this.model.initialParams();
    this.longPollMs = deps.longPollMs ?? 5000;
    this.sessionTimeoutMs = deps.sessionTimeoutMs ?? 300_000;
  }

  /** Builds the server over the sessions and training models found on disk. */
  static async open(deps: SimTrainerServerDeps): Promise<SimTrainerServer> {
    const server = new SimTrainerServer(deps);
    const { models, skipped } = await deps.store.listTrainingModels();
    for (const record of models) {
      const seqs = new Map<number, { requestId: string; route: string; bodyHash: string }>();
      for (const op of record.applied) if (op.seqId !== null) seqs.set(op.seqId, op);
      const requests = record.applied.filter((op) => op.route !== 'create_model').length;
      server.models.set(record.modelId, { state: record, sessionId: record.sessionId, queue: Promise.resolve(), seqs, requests });
    }
    if (skipped.length > 0) deps.logger.warn({ skipped }, '[SIMULATED] trainer model files of an older format are ignored');
    // A restart is not the clients' silence: every session gets a fresh grace period.
    const now = new Date().toISOString();
    server.sessions = Object.fromEntries(Object.entries(await deps.store.readSessions()).map(([id, s]) => [id, { ...s, lastHeartbeatAt: now }]));
    if (server.models.size > 0) deps.logger.info({ models: [...server.models.keys()] }, '[SIMULATED] trainer resumed training models from disk');
    server.sweeper = setInterval(() => void server.expireSilentSessions(), Math.min(60_000, Math.max(50, server.sessionTimeoutMs / 4)));
    server.sweeper.unref();
    return server;
  }

  async handle(request: SimHttpRequest): Promise<SimHttpReply> {
    const route = `${request.method} ${request.path}`;
    switch (route) {
      case 'GET /api/v1/healthz':
        return { status: 200, json: { status: 'ok' } };
      case 'POST /api/v1/client/config':
        return { status: 200, json: { pjwt_auth_enabled: false } };
      case 'GET /api/v1/get_server_capabilities':
        return { status: 200, json: { supported_models: [{ model_name: this.deps.world.model.name }] } };
      case 'POST /api/v1/telemetry':
        return { status: 200, json: { status: 'accepted' } };
      case 'POST /api/v1/create_session':
        return this.createSession(request.body);
      case 'POST /api/v1/session_heartbeat':
        return this.sessionHeartbeat(request.body);
      case 'POST /api/v1/create_model':
        return this.createModel(request.body);
      case 'POST /api/v1/unload_model':
        return this.unloadModel(request.body);
      case 'POST /api/v1/get_info':
        return this.getInfo(request.body);
      case 'POST /api/v1/forward_backward':
        return this.forwardBackward(request);
      case 'POST /api/v1/optim_step':
        return this.optimStep(request.body);
      case 'POST /api/v1/save_weights_for_sampler':
        return this.saveWeightsForSampler(request.body);
      case 'POST /api/v1/create_sampling_session':
        return this.createSamplingSession(request.body);
      case 'POST /api/v1/asample':
        return this.sample(request.body);
      case 'POST /api/v1/weights_info':
        return this.weightsInfo(request.body);
      case 'POST /api/v1/save_weights':
        return this.saveWeights(request.body);
      case 'POST /api/v1/load_weights':
        return this.loadWeights(request.body);
      case 'POST /api/v1/retrieve_future':
        return this.retrieveFuture(request.body);
    }
    if (request.method === 'GET') {
      const checkpoints = /^\/api\/v1\/(?:training_runs|models)\/([^/]+)\/checkpoints$/.exec(request.path);
      if (checkpoints) return this.listCheckpoints(decodeURIComponent(checkpoints[1]));
      const archive = /^\/api\/v1\/training_runs\/([^/]+)\/checkpoints\/(.+)\/(archive|download)$/.exec(request.path);
      if (archive) return this.checkpointArchive(request, decodeURIComponent(archive[1]), decodeURIComponent(archive[2]), archive[3] as 'archive' | 'download');
      const sampler = /^\/api\/v1\/samplers\/([^/]+)$/.exec(request.path);
      if (sampler) return this.getSampler(decodeURIComponent(sampler[1]));
      const run = /^\/api\/v1\/training_runs\/([^/]+)$/.exec(request.path);
      if (run) return this.trainingRun(decodeURIComponent(run[1]));
    }
    if (request.method === 'DELETE') {
      const checkpoint = /^\/api\/v1\/training_runs\/([^/]+)\/checkpoints\/(.+)$/.exec(request.path);
      if (checkpoint) return this.deleteCheckpoint(decodeURIComponent(checkpoint[1]), decodeURIComponent(checkpoint[2]));
    }
    return { status: 404, json: { detail: 'Not Found' } };
  }

  badRequest(message: string): SimHttpReply {
    return { status: 400, json: { detail: message } };
  }

  /** Resolves once every op submitted so far has finished (and been persisted). */
  async drain(): Promise<void> {
    clearInterval(this.sweeper);
    await Promise.all([...this.models.values()].map((m) => m.queue));
  }

  // ------------------------------------------------------------ sessions

  private async createSession(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = CreateSessionRequest.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const id = `session_${randomBytes(4).toString('hex')}`;
    const now = new Date().toISOString();
    this.sessions[id] = { createdAt: now, lastHeartbeatAt: now, status: 'active' };
    await this.deps.store.writeSessions(this.sessions);
    this.deps.logger.info({ session_id: id, sdk_version: parsed.data.sdk_version }, '[SIMULATED] session created');
    return { status: 200, json: { type: 'create_session', session_id: id } };
  }

  private async sessionHeartbeat(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = SessionHeartbeatRequest.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const session = this.sessions[parsed.data.session_id];
    if (!session) return { status: 404, json: { detail: 'Session not found' } };
    session.lastHeartbeatAt = new Date().toISOString();
    return { status: 200, json: { type: 'session_heartbeat' } };
  }

  /** Sessions silent past the timeout expire; their models are unloaded (their training state is gone for clients). */
  private async expireSilentSessions(): Promise<void> {
    const cutoff = Date.now() - this.sessionTimeoutMs;
    const expired = Object.entries(this.sessions).filter(([, s]) => s.status === 'active' && Date.parse(s.lastHeartbeatAt) < cutoff);
    if (expired.length === 0) return;
    for (const [id, session] of expired) {
      session.status = 'expired';
      for (const [modelId, model] of this.models) {
        if (model.sessionId !== id || model.state?.status !== 'loaded') continue;
        const unloaded = { ...model.state, status: 'unloaded' as const };
        model.queue = model.queue.then(async () => {
          await this.deps.store.writeTrainingModel(unloaded);
          model.state = unloaded;
        });
        this.deps.logger.warn({ session_id: id, model_id: modelId }, '[SIMULATED] session expired without heartbeats; its model is unloaded');
      }
    }
    await this.deps.store.writeSessions(this.sessions).catch((err) => this.deps.logger.error({ err }, 'cannot persist sessions'));
  }

  // -------------------------------------------------------------- models

  private createModel(rawBody: unknown): SimHttpReply {
    const parsed = CreateModelRequest.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const body = parsed.data;
    if (!this.sessions[body.session_id]) return { status: 404, json: { detail: 'Session not found' } };
    const base = this.deps.world.model.name;
    if (body.base_model !== base) return this.badRequest(`base_model: '${body.base_model}' is not served here; this sim trainer trains '${base}'`);
    const modelId = `model_${randomBytes(4).toString('hex')}`;
    this.models.set(modelId, { queue: Promise.resolve(), sessionId: body.session_id, seqs: new Map(), requests: 0 });
    const lora = { ...body.lora_config, seed: body.lora_config.seed ?? null };
    const reply = this.submit('create_model', modelId, null, '', async () => {
      if (lora.rank > SIM_MAX_LORA_RANK) throw new SimTrainerUserError(`LoRA rank ${lora.rank} exceeds the maximum ${SIM_MAX_LORA_RANK}`);
      return { result: { json: { model_id: modelId, base_model: base, lora_config: lora } }, next: this.freshModel(modelId, body.session_id, lora) };
    });
    return { status: 200, json: { ...(reply.json as object), model_id: modelId, base_model: base, lora_config: body.lora_config, status: 'created' } };
  }

  private unloadModel(rawBody: unknown): SimHttpReply {
    const parsed = UnloadModelRequest.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const modelId = parsed.data.model_id;
    if (!this.models.has(modelId)) return modelNotFound();
    return this.submit('unload_model', modelId, null, '', async (state) => ({
      result: { json: { model_id: modelId, status: 'unloaded', type: 'unload_model' } },
      next: { ...state, status: 'unloaded' },
    }));
  }

  private async getInfo(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = ModelIdBody.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const model = this.models.get(parsed.data.model_id);
    if (!model) return modelNotFound();
    await model.queue; // answer after the ops submitted before this call
    if (!model.state) return { status: 500, json: { detail: `model '${parsed.data.model_id}' failed to be created` } };
    return {
      status: 200,
      json: {
        model_id: model.state.modelId,
        status: model.state.status,
        model_data: { base_model: model.state.baseModel, lora_config: { rank: model.state.lora.rank }, model_name: model.state.baseModel },
        optim_steps: model.state.optimSteps,
      },
    };
  }

  private trainingRun(modelId: string): SimHttpReply {
    const model = this.models.get(modelId);
    if (!model?.state) return modelNotFound();
    return {
      status: 200,
      json: {
        training_run_id: modelId,
        base_model: model.state.baseModel,
        model_owner: 'default',
        is_lora: true,
        corrupted: false,
        lora_rank: model.state.lora.rank,
        last_request_time: model.state.createdAt,
        last_checkpoint: null,
        last_sampler_checkpoint: null,
        user_metadata: null,
      },
    };
  }

  // ------------------------------------------------------------ training

  private forwardBackward(request: SimHttpRequest): SimHttpReply {
    if (request.contentType !== PROTOBUF_CONTENT_TYPE) {
      return { status: 415, json: { detail: `forward_backward requires a ${PROTOBUF_CONTENT_TYPE} body (tinker SDK >= 0.25.0)` } };
    }
    if (request.headers['content-encoding'] && request.headers['content-encoding'] !== 'identity') {
      return { status: 415, json: { detail: `forward_backward bodies in content-encoding '${String(request.headers['content-encoding'])}' are not supported by the sim trainer` } };
    }
    let body: ForwardBackwardBody;
    try {
      body = decodeForwardBackwardRequest(request.raw);
    } catch (err) {
      if (err instanceof TinkerWireError) return { status: 422, json: { detail: `Invalid proto forward_backward body: ${err.message}` } };
      throw err;
    }
    const problems = this.forwardBackwardProblems(body);
    if (problems.length > 0) return { status: 422, json: { detail: problems } };
    const modelId = body.model_id;
    if (!this.models.has(modelId)) return modelNotFound();
    const route = body.forward_only ? 'forward' : 'forward_backward';
    const { model_id: _model, seq_id: _seq, ...payload } = body;
    return this.submit(route, modelId, body.seq_id, hashBody(payload), async (state) => {
      if (body.forward_only) {
        const logprobs = forwardLogprobs(this.model, state.params, body.data);
        return { result: { proto: protoBase64(encodeForwardBackwardResult({ loss_fn_output_type: 'TensorData', metrics: {}, loss_fn_outputs: logprobs.map(floatOutput) })) } };
      }
      const step = importanceSamplingStep(this.model, state.params, state.grad, body.data);
      const result = encodeForwardBackwardResult({
        loss_fn_output_type: 'TensorData',
        metrics: { 'loss:sum': step.lossSum },
        loss_fn_outputs: step.logprobs.map(floatOutput),
      });
      return { result: { proto: protoBase64(result) }, next: { ...state, grad: step.grad } };
    }, body.data.reduce((n, datum) => n + datumTokens(datum).length, 0));
  }

  private optimStep(rawBody: unknown): SimHttpReply {
    const parsed = OptimStepBody.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const { model_id: modelId, adam_params: adam, seq_id: seqId } = parsed.data;
    if (!this.models.has(modelId)) return modelNotFound();
    return this.submit('optim_step', modelId, seqId ?? null, hashBody(adam), async (state) => {
      const step = state.optimSteps + 1;
      const updated = adamStep(
        { params: this.model.flatten(state.params), grad: this.model.flatten(state.grad), m: this.model.flatten(state.adam.m), v: this.model.flatten(state.adam.v) },
        step,
        adam,
      );
      return {
        result: { json: { metrics: { 'optim/step': step, grad_norm: updated.gradNorm } } },
        next: {
          ...state,
          params: this.model.unflatten(updated.params),
          adam: { m: this.model.unflatten(updated.m), v: this.model.unflatten(updated.v) },
          grad: this.model.zeroParams(),
          optimSteps: step,
        },
      };
    });
  }

  private async saveWeightsForSampler(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = SaveWeightsForSamplerBody.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const body = parsed.data;
    const modelId = body.model_id;
    const model = this.models.get(modelId);
    if (!model) return modelNotFound();
    const name = body.path ?? `ss${body.sampling_session_seq_id}_seq${body.seq_id}`;
    const key = `${modelId}/${name}`;
    if (this.pendingCheckpoints.has(key) || this.failedCheckpoints.has(key) || (await this.deps.store.samplerArchive(modelId, name))) {
      return { status: 409, json: { detail: `Checkpoint '${name}' already exists for model '${modelId}'` } };
    }
    this.pendingCheckpoints.add(key);
    const samplingSessionId = body.path ? null : `sampling_${randomBytes(4).toString('hex')}`;
    if (samplingSessionId) this.samplingSessions.set(samplingSessionId, { sessionId: model.sessionId, basePath: `tinker://${modelId}/sampler_weights/${name}` });
    return this.submit('save_weights_for_sampler', modelId, body.seq_id ?? null, hashBody({ name }), async (state) => {
      try {
        await this.deps.store.writeSamplerWeightsOnce(
          { version: 1, modelId, name, baseModel: state.baseModel, optimSteps: state.optimSteps, savedAt: new Date().toISOString(), params: state.params },
          state.lora,
        );
      } catch (err) {
        // As SkyRL: a failed checkpoint keeps its name (409 on a new save of it; the archive answers 500).
        this.failedCheckpoints.set(key, (err as Error).message);
        throw err;
      } finally {
        this.pendingCheckpoints.delete(key);
      }
      const path = samplingSessionId ? null : samplerWeightsUri(modelId, name);
      return { result: { json: { path, type: 'save_weights_for_sampler', sampling_session_id: samplingSessionId } } };
    });
  }

  /** Completed checkpoints of a model, also of one no longer loaded (as SkyRL lists its database: a lost model's training states stay). */
  private async listCheckpoints(modelId: string): Promise<SimHttpReply> {
    if (!SAFE_NAME.test(modelId)) return { status: 422, json: { detail: [{ loc: ['path', 'unique_id'], msg: 'String should match pattern' }] } };
    const saved = await this.deps.store.samplerCheckpoints(modelId);
    const states = await this.deps.store.trainingStates(modelId);
    return {
      status: 200,
      json: {
        checkpoints: [
          ...states.map((c) => ({ checkpoint_id: c.name, checkpoint_type: 'training', time: c.savedAt.toISOString(), tinker_path: `tinker://${modelId}/weights/${c.name}` })),
          ...saved.map((c) => ({
            checkpoint_id: c.name,
            checkpoint_type: 'sampler',
            time: c.savedAt.toISOString(),
            tinker_path: `tinker://${modelId}/sampler_weights/${c.name}`,
          })),
        ],
      },
    };
  }

  /** archive: a 302 to the download, as SkyRL answers; download: the tar.gz bytes. */
  private async checkpointArchive(request: SimHttpRequest, modelId: string, checkpointId: string, kind: 'archive' | 'download'): Promise<SimHttpReply> {
    const name = checkpointId.replace(/^sampler_weights\//, '');
    if (!SAFE_NAME.test(modelId) || !SAFE_NAME.test(name)) return { status: 404, json: { detail: `Checkpoint not found: ${modelId}/${checkpointId}` } };
    if (this.pendingCheckpoints.has(`${modelId}/${name}`)) return { status: 425, json: { detail: 'Checkpoint is still being created' } };
    const failed = this.failedCheckpoints.get(`${modelId}/${name}`);
    if (failed !== undefined) return { status: 500, json: { detail: `Checkpoint creation failed: ${failed}` } };
    const file = await this.deps.store.samplerArchive(modelId, name);
    if (!file) return { status: 404, json: { detail: `Checkpoint not found: ${modelId}/${checkpointId}` } };
    if (kind === 'archive') {
      const host = request.headers.host ?? '127.0.0.1';
      return { status: 302, headers: { location: `http://${host}/api/v1/training_runs/${modelId}/checkpoints/${name}/download` } };
    }
    return {
      status: 200,
      bytes: await fs.readFile(file),
      contentType: 'application/octet-stream',
      headers: { 'content-disposition': `attachment; filename="${modelId}_${name}.tar.gz"` },
    };
  }

  // ------------------------------------------------------------ sampling

  private createSamplingSession(rawBody: unknown): SimHttpReply {
    const parsed = CreateSamplingSessionBody.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    if (!this.sessions[parsed.data.session_id]) return { status: 404, json: { detail: 'Session not found' } };
    const id = `sampling_${randomBytes(4).toString('hex')}`;
    this.samplingSessions.set(id, { sessionId: parsed.data.session_id, basePath: parsed.data.model_path ?? null });
    return { status: 200, json: { type: 'create_sampling_session', sampling_session_id: id } };
  }

  private getSampler(samplerId: string): SimHttpReply {
    const sampler = this.samplingSessions.get(samplerId);
    if (!sampler) return { status: 404, json: { detail: 'Sampler not found' } };
    return { status: 200, json: { sampler_id: samplerId, base_model: this.deps.world.model.name, model_path: sampler.basePath } };
  }

  /** What a training checkpoint is, from the checkpoint alone (its model may be long gone). */
  private async weightsInfo(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = WeightsInfoRequest.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const path = parseTinkerPath(parsed.data.tinker_path);
    if (!path || path.kind !== 'weights') return { status: 400, json: { detail: 'Invalid tinker path format. Expected: tinker://model_id/weights/checkpoint_id' } };
    const unready = this.trainingStateUnready(path.modelId, path.name);
    if (unready) return unready;
    const saved = await this.deps.store.readTrainingState(path.modelId, path.name);
    if (!saved) return { status: 404, json: { detail: `Checkpoint not found: ${path.modelId}/${path.name}` } };
    return { status: 200, json: { base_model: saved.baseModel, is_lora: true, lora_rank: saved.lora.rank } };
  }

  /** 425 while a training checkpoint is being written, 500 when its save failed; null when neither. */
  private trainingStateUnready(modelId: string, name: string): SimHttpReply | null {
    const key = `${modelId}/weights/${name}`;
    if (this.pendingCheckpoints.has(key)) return { status: 425, json: { detail: 'Checkpoint is still being created' } };
    const failed = this.failedCheckpoints.get(key);
    if (failed !== undefined) return { status: 500, json: { detail: `Checkpoint creation failed: ${failed}` } };
    return null;
  }

  // ------------------------------------------------------ training state

  /** The model's params and Adam moments under a name, kept apart from the live models. */
  private async saveWeights(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = SaveWeightsRequest.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const { model_id: modelId, path: name, seq_id: seqId } = parsed.data;
    if (!this.models.has(modelId)) return modelNotFound();
    const key = `${modelId}/weights/${name}`;
    if (this.pendingCheckpoints.has(key) || this.failedCheckpoints.has(key) || (await this.deps.store.readTrainingState(modelId, name))) {
      return { status: 409, json: { detail: `Checkpoint '${name}' already exists for model '${modelId}'` } };
    }
    this.pendingCheckpoints.add(key);
    return this.submit('save_weights', modelId, seqId ?? null, hashBody({ name }), async (state) => {
      try {
        await this.deps.store.writeTrainingState({
          version: 1, modelId, name, baseModel: state.baseModel, lora: state.lora, optimSteps: state.optimSteps,
          savedAt: new Date().toISOString(), params: state.params, adam: state.adam,
        });
      } catch (err) {
        this.failedCheckpoints.set(key, (err as Error).message);
        throw err;
      } finally {
        this.pendingCheckpoints.delete(key);
      }
      return { result: { json: { path: `tinker://${modelId}/weights/${name}`, type: 'save_weights' } } };
    });
  }

  /** A training checkpoint into a model, as its first request (SkyRL and Tinker refuse it later). */
  private async loadWeights(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = LoadWeightsRequest.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const { model_id: modelId, path: tinkerPath, optimizer, seq_id: seqId } = parsed.data;
    const model = this.models.get(modelId);
    if (!model) return modelNotFound();
    const seen = seqId != null ? model.seqs.get(seqId) : undefined;
    if (model.requests > 0 && !(seen?.route === 'load_weights')) {
      return this.badRequest(`LoadWeights is not permitted with seq_id ${seqId ?? model.requests + 1}`);
    }
    const path = parseTinkerPath(tinkerPath);
    if (!path || path.kind !== 'weights') return this.badRequest('request.path must be in format tinker://source_model_id/weights/checkpoint_id');
    const unready = this.trainingStateUnready(path.modelId, path.name);
    if (unready) return unready;
    const saved = await this.deps.store.readTrainingState(path.modelId, path.name);
    if (!saved) return { status: 404, json: { detail: `Checkpoint not found: ${path.modelId}/${path.name}` } };
    return this.submit('load_weights', modelId, seqId ?? null, hashBody({ tinkerPath, optimizer }), async (state) => {
      if (saved.baseModel !== state.baseModel || saved.lora.rank !== state.lora.rank) {
        throw new SimTrainerUserError(
          `checkpoint ${tinkerPath} is of ${saved.baseModel} with LoRA rank ${saved.lora.rank}; model ${modelId} is of ${state.baseModel} with rank ${state.lora.rank}`,
        );
      }
      return {
        result: { json: { path: tinkerPath, type: 'load_weights' } },
        next: {
          ...state,
          params: saved.params,
          grad: this.model.zeroParams(),
          adam: optimizer ? saved.adam : { m: this.model.zeroParams(), v: this.model.zeroParams() },
          optimSteps: optimizer ? saved.optimSteps : 0,
        },
      };
    });
  }

  /** DELETE of a checkpoint named `weights/<name>` or `sampler_weights/<name>` (a bare name is ambiguous: 400, as SkyRL). */
  private async deleteCheckpoint(modelId: string, checkpointPath: string): Promise<SimHttpReply> {
    const match = /^(weights|sampler_weights)\/([^/]+)$/.exec(checkpointPath);
    if (!match) {
      return this.badRequest("Invalid checkpoint identifier. Expected format 'weights/<name>' (training weights) or 'sampler_weights/<name>' (sampler weights)");
    }
    const [, kind, name] = match;
    if (kind === 'sampler_weights') return this.badRequest('the sim trainer keeps sampler weights for good (publishing reads them); only training checkpoints are deleted');
    const key = `${modelId}/weights/${name}`;
    if (this.pendingCheckpoints.has(key)) return { status: 425, json: { detail: 'Checkpoint is still being created' } };
    // A failed save leaves no file but a record, which deleting frees (its name can be saved again), as SkyRL's row.
    const failed = this.failedCheckpoints.delete(key);
    if (!(await this.deps.store.deleteTrainingState(modelId, name)) && !failed) return { status: 404, json: { detail: `Checkpoint not found: ${modelId}/${name}` } };
    return { status: 204 };
  }

  /** Samples from the base policy or from saved sampler weights; the result is protobuf. */
  private async sample(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = SampleBody.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const body = parsed.data;
    const session = body.sampling_session_id ? this.samplingSessions.get(body.sampling_session_id) : undefined;
    if (body.sampling_session_id && !session) return { status: 404, json: { detail: 'Sampling session not found' } };
    const modelPath = session ? session.basePath : (body.model_path ?? null);
    let params = this.baseParams;
    if (modelPath) {
      const location = parseTinkerPath(modelPath);
      const saved = location && (await this.deps.store.readSamplerWeights(location.modelId, location.name));
      if (!saved) return this.badRequest(`model_path '${modelPath}' names no saved sampler weights`);
      params = saved.params;
    } else if (body.base_model && body.base_model !== this.deps.world.model.name) {
      return this.badRequest(`base_model: '${body.base_model}' is not served here`);
    }
    const requestId = `${Date.now()}${randomBytes(3).readUIntBE(0, 3)}`;
    this.futures.set(requestId, { status: 'pending', waiters: [] });
    const prompt = body.prompt.chunks.flatMap((c) => c.tokens);
    setImmediate(() => {
      let result: FutureRecord['result'];
      try {
        const sequences = Array.from({ length: body.num_samples }, (_, i) => {
          const random = body.sampling_params.seed != null ? seededRandom(body.sampling_params.seed + i, prompt.length) : Math.random;
          const generated = this.model.generate(params, prompt, { temperature: body.sampling_params.temperature, maxTokens: body.sampling_params.max_tokens, random });
          const stopped = generated.at(-1)?.id === this.model.tokenizer.id(END);
          return { stop_reason: stopped ? ('stop' as const) : ('length' as const), tokens: generated.map((t) => t.id), logprobs: generated.map((t) => t.logprob) };
        });
        const promptLogprobs = body.prompt_logprobs ? [null, ...forwardLogprobs(this.model, params, [datumOf(prompt)])[0]] : null;
        result = { proto: protoBase64(encodeSampleResult({ sequences, prompt_logprobs: promptLogprobs })) };
      } catch (err) {
        result = err instanceof SimPolicyInputError ? { error: `prompt: ${err.message}`, category: 'user' } : { error: (err as Error).message, category: 'server' };
      }
      this.finishFuture({ requestId, modelId: '', route: 'sample', finishedAt: new Date().toISOString(), result });
    });
    return { status: 200, json: { future_id: requestId, request_id: requestId, status: 'pending' } };
  }

  // ------------------------------------------------------------- futures

  private async retrieveFuture(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = RetrieveFutureRequest.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const requestId = parsed.data.request_id;
    let future = this.futures.get(requestId);
    if (future?.status === 'pending') {
      const pending = future;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.longPollMs);
        pending.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      future = this.futures.get(requestId);
      if (future?.status === 'pending') return { status: 408, json: { detail: 'Timeout waiting for result' } };
    }
    const record = future?.status === 'done' ? future.record : await this.committedFutureFromDisk(requestId);
    if (!record) return { status: 404, json: { detail: 'Future not found' } };
    const { result } = record;
    if ('proto' in result) return { status: 200, bytes: Buffer.from(result.proto, 'base64'), contentType: PROTOBUF_CONTENT_TYPE };
    if ('json' in result) return { status: 200, json: result.json ?? null };
    return result.category === 'user' ? { status: 400, json: { detail: result.error } } : { status: 200, json: result };
  }

  /** A finished future from an earlier run of the cluster; a success whose op never committed does not count. */
  private async committedFutureFromDisk(requestId: string): Promise<FutureRecord | undefined> {
    const record = await this.deps.store.readFuture(requestId);
    if (!record) return undefined;
    if ('error' in record.result || record.route === 'forward' || record.route === 'sample') return record;
    const committed = this.models.get(record.modelId)?.state?.applied.some((op) => op.requestId === requestId);
    return committed ? record : undefined;
  }

  /**
   * Answers with a future now and runs `op` on the model's queue later. An
   * op under a seq_id the model has seen returns that op's future (same
   * body) or 409 (another body). The op's result is written before its new
   * state commits; a failure leaves the state as it was.
   */
  private submit(
    route: string,
    modelId: string,
    seqId: number | null,
    bodyHash: string,
    op: (state: TrainingModelRecord) => Promise<OpOutcome>,
    /** The batch's tokens, for the latency model (forward and forward_backward). */
    tokens = 0,
  ): SimHttpReply {
    const model = this.models.get(modelId)!;
    if (seqId !== null) {
      const seen = model.seqs.get(seqId);
      if (seen && (seen.route !== route || seen.bodyHash !== bodyHash)) {
        return { status: 409, json: { detail: 'Training request sequence number was reused' } };
      }
      if (seen) return { status: 200, json: { future_id: seen.requestId, request_id: seen.requestId, status: 'pending', model_id: modelId } };
    }
    const requestId = `${Date.now()}${randomBytes(3).readUIntBE(0, 3)}`;
    if (seqId !== null) model.seqs.set(seqId, { requestId, route, bodyHash });
    if (route !== 'create_model') model.requests += 1;
    this.futures.set(requestId, { status: 'pending', waiters: [] });
    model.queue = model.queue.then(() => this.simulatedLatency(route, tokens)).then(() => this.runOp({ requestId, route, seqId, bodyHash }, modelId, model, op));
    return { status: 200, json: { future_id: requestId, request_id: requestId, status: 'pending', model_id: modelId } };
  }

  private async runOp(applied: AppliedOp, modelId: string, model: TrainingModel, op: (state: TrainingModelRecord) => Promise<OpOutcome>): Promise<void> {
    const finish = (result: FutureRecord['result']): FutureRecord => ({
      requestId: applied.requestId,
      modelId,
      route: applied.route,
      finishedAt: new Date().toISOString(),
      result,
    });
    try {
      const current = applied.route === 'create_model' ? undefined : model.state;
      if (applied.route !== 'create_model' && (!current || current.status !== 'loaded')) {
        throw new SimTrainerUserError(
          current ? `Model '${modelId}' is not loaded (its session expired or it was unloaded); create a new model` : `model '${modelId}' failed to be created`,
        );
      }
      const outcome = await op(current!);
      const record = finish(outcome.result);
      await this.deps.store.writeFuture(record);
      if (outcome.next) {
        const next = { ...outcome.next, applied: [...outcome.next.applied, applied].slice(-APPLIED_RETENTION) };
        await this.deps.store.writeTrainingModel(next);
        model.state = next;
      }
      this.finishFuture(record);
      this.deps.logger.info({ op: applied.route, request_id: applied.requestId, model_id: modelId, seq_id: applied.seqId }, `[SIMULATED] ${applied.route} done`);
    } catch (err) {
      const user = err instanceof SimTrainerUserError || err instanceof SimPolicyInputError;
      const record = finish({ error: (err as Error).message, category: user ? 'user' : 'server' });
      // As SkyRL: the seq_id keeps answering with this failed future; the op is sent again under a new seq_id.
      this.finishFuture(record);
      this.deps.logger.warn({ op: applied.route, request_id: applied.requestId, model_id: modelId, err }, `[SIMULATED] ${applied.route} failed`);
      await this.deps.store.writeFuture(record).catch((writeErr) => this.deps.logger.error({ err: writeErr }, 'cannot persist a failed future'));
    }
  }

  private finishFuture(record: FutureRecord): void {
    const previous = this.futures.get(record.requestId);
    this.futures.set(record.requestId, { status: 'done', record });
    if (previous?.status === 'pending') previous.waiters.forEach((wake) => wake());
  }

  /** The op's time on the latency model when it times it, else opDelayMs. */
  private simulatedLatency(route: string, tokens: number): Promise<void> {
    const latency = this.deps.latency;
    if (latency?.timesTrainerOp(route)) return latency.trainerOp(route, tokens);
    const ms = this.deps.opDelayMs;
    return new Promise((resolve) => (ms > 0 ? setTimeout(resolve, ms) : setImmediate(resolve)));
  }

  private freshModel(modelId: string, sessionId: string, lora: TrainingModelRecord['lora']): TrainingModelRecord {
    return {
      version: 2,
      modelId,
      sessionId,
      baseModel: this.deps.world.model.name,
      lora,
      status: 'loaded',
      createdAt: new Date().toISOString(),
      params: this.model.initialParams(),
      grad: this.model.zeroParams(),
      adam: { m: this.model.zeroParams(), v: this.model.zeroParams() },
      optimSteps: 0,
      applied: [],
    };
  }

  /** Checks of a forward_backward body: FastAPI-style `{loc, msg}` per bad field. */
  private forwardBackwardProblems(body: ForwardBackwardBody): Array<{ loc: Array<string | number>; msg: string }> {
    const problems: Array<{ loc: Array<string | number>; msg: string }> = [];
    const at = (loc: Array<string | number>, msg: string) => problems.push({ loc: ['body', 'forward_backward_input', ...loc], msg });
    const lossFn = body.loss_fn;
    if (!(SUPPORTED_LOSSES as readonly string[]).includes(lossFn)) at(['loss_fn'], `loss_fn '${lossFn}' is not supported by the sim trainer; use ${SUPPORTED_LOSSES.join(' or ')}`);
    const needed = body.forward_only || lossFn === 'cross_entropy' ? ['target_tokens'] : ['target_tokens', 'logprobs', 'advantages'];
    const tokenizer = this.model.tokenizer;
    body.data.forEach((datum, i) => {
      const tokens = datumTokens(datum);
      const badToken = tokens.find((id) => !tokenizer.isValidId(id));
      if (badToken !== undefined) at(['data', i, 'model_input'], `token id ${badToken} is outside the sim vocabulary (size ${tokenizer.size})`);
      for (const field of needed) {
        const tensor = datum.loss_fn_inputs[field];
        if (!tensor) at(['data', i, 'loss_fn_inputs', field], `missing; ${body.forward_only ? 'forward' : lossFn} needs ${needed.join(', ')}`);
        else if (tensor.data.length !== tokens.length) at(['data', i, 'loss_fn_inputs', field], `has ${tensor.data.length} values but model_input has ${tokens.length} tokens`);
      }
      const badTarget = datum.loss_fn_inputs.target_tokens?.data.find((id) => !tokenizer.isValidId(id));
      if (badTarget !== undefined) at(['data', i, 'loss_fn_inputs', 'target_tokens'], `token id ${badTarget} is outside the sim vocabulary`);
    });
    return problems;
  }
}

function invalid(error: z.ZodError): SimHttpReply {
  return { status: 422, json: { detail: error.issues.map((issue) => ({ loc: ['body', ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))], msg: issue.message })) } };
}

function modelNotFound(): SimHttpReply {
  return { status: 404, json: { detail: 'Model not found' } };
}

function protoBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64');
}

function floatOutput(logprobs: number[]) {
  return { logprobs: { data: logprobs, dtype: 'float32' as const } };
}

/** A prompt as a datum (model_input = prompt[:-1], targets = prompt[1:]), for its prompt log-probs. */
function datumOf(prompt: number[]) {
  return { model_input: { chunks: [{ tokens: prompt.slice(0, -1) }] }, loss_fn_inputs: { target_tokens: { data: prompt.slice(1), dtype: 'int64' as const } } };
}
