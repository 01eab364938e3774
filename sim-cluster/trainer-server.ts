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
 *
 * This file routes the API and answers sessions, models and training;
 * trainer-sampling.ts answers sampling, trainer-state.ts holds the state and the op queue (futures),
 * trainer-checkpoint-routes.ts the checkpoint routes, trainer-requests.ts
 * the request bodies and reply shapes.
 */
import { randomBytes } from 'node:crypto';
import {
  CreateModelRequest,
  CreateSessionRequest,
  decodeForwardBackwardRequest,
  encodeForwardBackwardResult,
  type ForwardBackwardBody,
  PROTOBUF_CONTENT_TYPE,
  SessionHeartbeatRequest,
  TinkerWireError,
  UnloadModelRequest,
} from '../core/trainer/tinker/wire';
import { hashBody } from './checkpoints';
import { adamStep, datumTokens, forwardLogprobs, importanceSamplingStep, SimTrainerUserError, SUPPORTED_LOSSES } from './learning-rule';
import type { SimApi, SimHttpReply, SimHttpRequest } from './http';
import { SIM_MAX_LORA_RANK, OptimStepBody, ModelIdBody, invalid, modelNotFound, protoBase64, floatOutput } from './trainer-requests';
import type { SimTrainerServerDeps } from './trainer-state';
import { SimTrainerSampling } from './trainer-sampling';

export { SimTrainerUserError } from './learning-rule';
export { SIM_MAX_LORA_RANK } from './trainer-requests';
export type { SimTrainerServerDeps } from './trainer-state';

export class SimTrainerServer extends SimTrainerSampling implements SimApi {
  private constructor(deps: SimTrainerServerDeps) {
    super(deps);
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
    server.sessions = Object.fromEntries(
      Object.entries(await deps.store.readSessions()).map(([id, s]) => [id, { ...s, lastHeartbeatAt: now }]),
    );
    if (server.models.size > 0)
      deps.logger.info({ models: [...server.models.keys()] }, '[SIMULATED] trainer resumed training models from disk');
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
      if (archive)
        return this.checkpointArchive(
          request,
          decodeURIComponent(archive[1]),
          decodeURIComponent(archive[2]),
          archive[3] as 'archive' | 'download',
        );
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
        this.deps.logger.warn(
          { session_id: id, model_id: modelId },
          '[SIMULATED] session expired without heartbeats; its model is unloaded',
        );
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
    if (body.base_model !== base)
      return this.badRequest(`base_model: '${body.base_model}' is not served here; this sim trainer trains '${base}'`);
    const modelId = `model_${randomBytes(4).toString('hex')}`;
    this.models.set(modelId, { queue: Promise.resolve(), sessionId: body.session_id, seqs: new Map(), requests: 0 });
    const lora = { ...body.lora_config, seed: body.lora_config.seed ?? null };
    const reply = this.submit('create_model', modelId, null, '', async () => {
      if (lora.rank > SIM_MAX_LORA_RANK) throw new SimTrainerUserError(`LoRA rank ${lora.rank} exceeds the maximum ${SIM_MAX_LORA_RANK}`);
      return {
        result: { json: { model_id: modelId, base_model: base, lora_config: lora } },
        next: this.freshModel(modelId, body.session_id, lora),
      };
    });
    return {
      status: 200,
      json: { ...(reply.json as object), model_id: modelId, base_model: base, lora_config: body.lora_config, status: 'created' },
    };
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
      return {
        status: 415,
        json: {
          detail: `forward_backward bodies in content-encoding '${String(request.headers['content-encoding'])}' are not supported by the sim trainer`,
        },
      };
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
    return this.submit(
      route,
      modelId,
      body.seq_id,
      hashBody(payload),
      async (state) => {
        if (body.forward_only) {
          const logprobs = forwardLogprobs(this.model, state.params, body.data);
          return {
            result: {
              proto: protoBase64(
                encodeForwardBackwardResult({ loss_fn_output_type: 'TensorData', metrics: {}, loss_fn_outputs: logprobs.map(floatOutput) }),
              ),
            },
          };
        }
        const step = importanceSamplingStep(this.model, state.params, state.grad, body.data);
        const result = encodeForwardBackwardResult({
          loss_fn_output_type: 'TensorData',
          metrics: { 'loss:sum': step.lossSum },
          loss_fn_outputs: step.logprobs.map(floatOutput),
        });
        return { result: { proto: protoBase64(result) }, next: { ...state, grad: step.grad } };
      },
      body.data.reduce((n, datum) => n + datumTokens(datum).length, 0),
    );
  }

  private optimStep(rawBody: unknown): SimHttpReply {
    const parsed = OptimStepBody.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const { model_id: modelId, adam_params: adam, seq_id: seqId } = parsed.data;
    if (!this.models.has(modelId)) return modelNotFound();
    return this.submit('optim_step', modelId, seqId ?? null, hashBody(adam), async (state) => {
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

  /** Checks of a forward_backward body: FastAPI-style `{loc, msg}` per bad field. */
  private forwardBackwardProblems(body: ForwardBackwardBody): Array<{ loc: Array<string | number>; msg: string }> {
    const problems: Array<{ loc: Array<string | number>; msg: string }> = [];
    const at = (loc: Array<string | number>, msg: string) => problems.push({ loc: ['body', 'forward_backward_input', ...loc], msg });
    const lossFn = body.loss_fn;
    if (!(SUPPORTED_LOSSES as readonly string[]).includes(lossFn))
      at(['loss_fn'], `loss_fn '${lossFn}' is not supported by the sim trainer; use ${SUPPORTED_LOSSES.join(' or ')}`);
    const needed = body.forward_only || lossFn === 'cross_entropy' ? ['target_tokens'] : ['target_tokens', 'logprobs', 'advantages'];
    const tokenizer = this.model.tokenizer;
    body.data.forEach((datum, i) => {
      const tokens = datumTokens(datum);
      const badToken = tokens.find((id) => !tokenizer.isValidId(id));
      if (badToken !== undefined)
        at(['data', i, 'model_input'], `token id ${badToken} is outside the sim vocabulary (size ${tokenizer.size})`);
      for (const field of needed) {
        const tensor = datum.loss_fn_inputs[field];
        if (!tensor)
          at(['data', i, 'loss_fn_inputs', field], `missing; ${body.forward_only ? 'forward' : lossFn} needs ${needed.join(', ')}`);
        else if (tensor.data.length !== tokens.length)
          at(['data', i, 'loss_fn_inputs', field], `has ${tensor.data.length} values but model_input has ${tokens.length} tokens`);
      }
      const badTarget = datum.loss_fn_inputs.target_tokens?.data.find((id) => !tokenizer.isValidId(id));
      if (badTarget !== undefined)
        at(['data', i, 'loss_fn_inputs', 'target_tokens'], `token id ${badTarget} is outside the sim vocabulary`);
    });
    return problems;
  }
}
