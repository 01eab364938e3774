/**
 * A client of the Tinker REST API as the official tinker SDK (>= 0.25) speaks
 * it, for the calls a training step makes: sessions, create_model with a LoRA
 * config, forward_backward and forward (protobuf bodies and results),
 * optim_step, save_weights_for_sampler, checkpoint listing and archive
 * download, and the training state a run restores from (save_weights,
 * load_weights, weights_info, deleting a training checkpoint). Any
 * Tinker-compatible trainer works: hosted Tinker, SkyRL's Tinker server, the
 * sim cluster.
 *
 * A trainer that no longer has the model an op trains or saves (a future
 * failed with "Model <id> not loaded", or a 404 "Model not found") is
 * TrainerModelGoneError: no retry can help; the run restores from a checkpoint.
 *
 * Futures are polled with the SDK's rules: HTTP 408 and 5xx (and a 200
 * `{type: "try_again"}`) mean "not yet, poll again"; 410 means the future is
 * gone and the op is sent again (its seq_id makes that safe); a failure is a
 * 200 `{error, category}` or an HTTP 400 `{detail}`. Every reply is validated
 * (zod for JSON, the .proto for protobuf), and every request honours the
 * caller's AbortSignal.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { formatZodError } from '../../zod-errors';
import { countTrainerRetry, timeTrainerOp } from '../../metrics';
import {
  type AdamParams,
  CheckpointArchiveUrlResponse,
  CreateModelResponse,
  CreateModelResult,
  CreateSessionResponse,
  decodeForwardBackwardResult,
  encodeForwardBackwardRequest,
  errorMessage,
  type ForwardBackwardResult,
  FutureResponse,
  ListCheckpointsResponse,
  type LoraConfig,
  OptimStepResult,
  parseTinkerPath,
  PROTOBUF_CONTENT_TYPE,
  RequestFailed,
  SaveWeightsForSamplerResult,
  SaveWeightsResult,
  TINKER_SDK_WIRE_VERSION,
  TinkerWireError,
  TryAgain,
  type WireDatum,
  WeightsInfoResponse,
} from './wire';

export class TrainerError extends Error {
  override name = 'TrainerError';
  constructor(
    message: string,
    /** 'user': the request (or the config behind it) is wrong and retrying will not help; 'server': a retry may. */
    readonly category: 'user' | 'server',
    /**
     * True when the trainer answered the op's future with a failure: the op
     * was not applied, and its seq_id keeps answering with that failure, so a
     * retry must send it under a new seq_id. False when the outcome is unknown
     * (unreachable, no answer): a retry sends it under the same seq_id.
     */
    readonly opFailed = false,
  ) {
    super(message);
  }
}

export interface TinkerClientOptions {
  baseUrl: string;
  apiKey: string;
  /** Seconds between polls of a future the server says is not done. */
  pollSeconds: number;
  /** Aborts every request in flight (the activity's cancellation). */
  signal?: AbortSignal;
  /** First wait, in seconds, before a request to an unreachable server is tried again (doubling up to 30 s). */
  connectionRetrySeconds?: number;
  /** The longest wait between two attempts to reach the server (30 s when absent); a run's `retry.maxIntervalSeconds`. */
  maxConnectionRetrySeconds?: number;
  /** Seconds one HTTP request may take; a long poll past it is simply polled again. */
  requestTimeoutSeconds?: number;
}

/**
 * The trainer no longer has the model (it restarted, a node died, or the
 * session that owned it went silent past the trainer's timeout): retrying the
 * op cannot help; the run restores its model from a checkpoint.
 */
export class TrainerModelGoneError extends TrainerError {
  override name = 'TrainerModelGoneError';
  constructor(
    message: string,
    readonly modelId: string,
  ) {
    super(message, 'user', true);
  }
}

interface HttpReply {
  status: number;
  contentType: string;
  body: Buffer;
  headers: Headers;
}

/** Consecutive connection failures before an op gives up (about two minutes of backoff). */
const MAX_CONNECTION_FAILURES = 8;
/** Bare 400s tolerated on retrieve_future before it counts as the op's failure (a proxy may inject one). */
const MAX_BAD_REQUEST_POLLS = 3;
/** HTTP 5xx answers to retrieve_future in a row before the op fails (as a server error: the activity's retry polls the same future again). */
const MAX_SERVER_ERROR_POLLS = 30;
/** A failed op's error when the trainer has lost the model (SkyRL: "Model <id> not loaded"); retrying cannot help. */
const MODEL_GONE = /\bmodel\b.*\bnot loaded\b/i;
/**
 * A model-bound op's 404 when the trainer does not know the model: SkyRL's and
 * the sim's "Model not found", SkyRL's save routes' "Model '<id>' not found".
 * Anchored at the start so "Checkpoint not found: <model>/<name>" is not one.
 */
const MODEL_NOT_FOUND = /^model\b[^:]*\bnot (?:found|loaded)\b/i;
/** Times a vanished future (404, 410) is sent again before the op fails. */
const MAX_RESUBMITS = 3;

export class TinkerClient {
  private readonly base: string;

  constructor(private readonly options: TinkerClientOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '');
  }

  get baseUrl(): string {
    return this.base;
  }

  // ------------------------------------------------------------- sessions

  async createSession(tags: string[], userMetadata: Record<string, string>): Promise<string> {
    const reply = await this.request('POST', 'create_session', {
      tags,
      user_metadata: userMetadata,
      sdk_version: TINKER_SDK_WIRE_VERSION,
      type: 'create_session',
    });
    return this.parseJson('create_session', CreateSessionResponse, this.expectOk('create_session', reply)).session_id;
  }

  /** 'expired' when the server no longer knows the session (its models are unloaded with it). */
  async heartbeatSession(sessionId: string): Promise<'alive' | 'expired'> {
    let reply: HttpReply;
    try {
      reply = await this.send('POST', 'session_heartbeat', { session_id: sessionId, type: 'session_heartbeat' });
    } catch (err) {
      if (err instanceof UnreachableError) throw new TrainerError(`trainer ${this.base} is unreachable (session_heartbeat): ${err.message}`, 'server');
      throw err;
    }
    if (reply.status === 404) return 'expired';
    this.expectOk('session_heartbeat', reply);
    return 'alive';
  }

  // --------------------------------------------------------------- models

  /** Creates a LoRA training model and waits until the trainer has it. */
  async createModel(args: {
    sessionId: string;
    modelSeqId: number;
    baseModel: string;
    lora: LoraConfig;
    userMetadata?: Record<string, string>;
  }): Promise<string> {
    const body = {
      session_id: args.sessionId,
      model_seq_id: args.modelSeqId,
      base_model: args.baseModel,
      lora_config: args.lora,
      user_metadata: args.userMetadata ?? {},
      type: 'create_model',
    };
    let modelId = '';
    const result = await this.runFuture('create_model', async () => {
      const created = this.parseJson('create_model', CreateModelResponse, this.expectOk('create_model', await this.request('POST', 'create_model', body)));
      modelId = created.model_id;
      return created;
    });
    // SkyRL answers the creation future with the model; a server that answers nothing more is fine too.
    const parsed = CreateModelResult.safeParse(result.json ?? {});
    return parsed.success ? parsed.data.model_id : modelId;
  }

  /** Frees a model on the trainer (e.g. one created twice by a retried activity). */
  async unloadModel(modelId: string): Promise<void> {
    await this.runFuture('unload_model', async () =>
      this.parseJson('unload_model', FutureResponse, this.expectOk('unload_model', await this.request('POST', 'unload_model', { model_id: modelId, type: 'unload_model' }))),
    );
  }

  // -------------------------------------------------------------- training

  /**
   * forward_backward (or, with forwardOnly, a forward pass) over the datums,
   * as protobuf. `seqId` is the model's sequence number for this op: sent
   * again with the same body, the server returns the same future.
   */
  async forwardBackward(args: {
    modelId: string;
    seqId: number;
    data: WireDatum[];
    lossFn: string;
    forwardOnly?: boolean;
  }): Promise<ForwardBackwardResult> {
    const op = args.forwardOnly ? 'forward' : 'forward_backward';
    const body = encodeForwardBackwardRequest({
      model_id: args.modelId,
      seq_id: args.seqId,
      data: args.data,
      loss_fn: args.lossFn,
      loss_fn_config: null,
      forward_only: args.forwardOnly ?? false,
    });
    const result = await this.runFuture(op, async () => {
      const reply = await this.request('POST', 'forward_backward', body);
      if (reply.status === 415) {
        throw new TrainerError(
          `trainer ${this.base}: forward_backward refused the protobuf body (HTTP 415: ${this.detail(reply)}); ` +
            'this client speaks the Tinker API of SDK >= 0.25 (protobuf forward_backward); the server speaks an older one',
          'user',
        );
      }
      return this.parseJson(op, FutureResponse, this.expectModelOk(op, args.modelId, reply));
    }, args.modelId);
    if (!result.proto) {
      throw new TrainerError(
        `trainer ${this.base}: the ${op} result came back as ${result.json === undefined ? 'an empty body' : 'JSON'}, not protobuf; ` +
          'this client speaks the Tinker API of SDK >= 0.25, where forward and forward_backward results are protobuf',
        'user',
      );
    }
    try {
      return decodeForwardBackwardResult(result.proto);
    } catch (err) {
      if (err instanceof TinkerWireError) throw new TrainerError(`trainer ${this.base}: ${op} result: ${err.message}`, 'user');
      throw err;
    }
  }

  async optimStep(args: { modelId: string; seqId: number; adam: AdamParams }): Promise<Record<string, number>> {
    const body = { model_id: args.modelId, adam_params: args.adam, seq_id: args.seqId, type: 'optim_step' };
    const result = await this.runFuture(
      'optim_step',
      async () => this.parseJson('optim_step', FutureResponse, this.expectModelOk('optim_step', args.modelId, await this.request('POST', 'optim_step', body))),
      args.modelId,
    );
    const metrics = this.parseJson('optim_step result', OptimStepResult, result.json ?? {}).metrics ?? {};
    return Object.fromEntries(Object.entries(metrics).filter((e): e is [string, number] => e[1] !== null));
  }

  /**
   * Saves the model's weights for sampling under `name`; returns their
   * tinker:// path. A checkpoint of that name that already exists (a retried
   * step saved it before) is the same step's weights: it is found and returned.
   */
  async saveWeightsForSampler(args: { modelId: string; seqId: number; name: string; waitSeconds?: number }): Promise<string> {
    const body = { model_id: args.modelId, path: args.name, seq_id: args.seqId, type: 'save_weights_for_sampler' };
    let exists = false;
    const result = await this.runFuture('save_weights_for_sampler', async () => {
      const reply = await this.request('POST', 'save_weights_for_sampler', body);
      if (reply.status === 409) {
        exists = true;
        return null;
      }
      return this.parseJson('save_weights_for_sampler', FutureResponse, this.expectModelOk('save_weights_for_sampler', args.modelId, reply));
    }, args.modelId);
    if (exists) return this.awaitCheckpoint(args.modelId, args.name, 'sampler', args.waitSeconds ?? 600);
    return this.parseJson('save_weights_for_sampler result', SaveWeightsForSamplerResult, result.json ?? {}).path;
  }

  /**
   * Saves the model's full training state (weights and optimizer state; the
   * SDK's save_state) as checkpoint `name`; returns its
   * tinker://<model>/weights/<name> path. A checkpoint of that name that
   * exists (HTTP 409: a retried save) is waited for and returned; one whose
   * save failed is reported as failed (opFailed), to be saved under a new name.
   */
  async saveWeights(args: { modelId: string; seqId: number; name: string; waitSeconds?: number }): Promise<string> {
    const body = { model_id: args.modelId, path: args.name, seq_id: args.seqId, type: 'save_weights' };
    let exists = false;
    const result = await this.runFuture('save_weights', async () => {
      const reply = await this.request('POST', 'save_weights', body);
      if (reply.status === 409) {
        exists = true;
        return null;
      }
      return this.parseJson('save_weights', FutureResponse, this.expectModelOk('save_weights', args.modelId, reply));
    }, args.modelId);
    if (exists) return this.awaitCheckpoint(args.modelId, args.name, 'training', args.waitSeconds ?? 600);
    return this.parseJson('save_weights result', SaveWeightsResult, result.json ?? {}).path;
  }

  /**
   * Loads a training checkpoint (tinker://<model>/weights/<name>) into
   * `modelId`, with its optimizer state when `optimizer`; a trainer takes it
   * only as the model's first request after create_model.
   */
  async loadWeights(args: { modelId: string; seqId: number; path: string; optimizer: boolean }): Promise<void> {
    const body = { model_id: args.modelId, path: args.path, optimizer: args.optimizer, seq_id: args.seqId, type: 'load_weights' };
    await this.runFuture(
      'load_weights',
      async () => this.parseJson('load_weights', FutureResponse, this.expectModelOk('load_weights', args.modelId, await this.request('POST', 'load_weights', body))),
      args.modelId,
    );
  }

  /** What a training checkpoint is: its base model and LoRA rank. A path the trainer does not know is a TrainerError ('user'). */
  async weightsInfo(tinkerPath: string): Promise<{ baseModel: string; isLora: boolean; loraRank: number | null }> {
    const reply = await this.request('POST', 'weights_info', { tinker_path: tinkerPath });
    const info = this.parseJson('weights_info', WeightsInfoResponse, this.expectOk('weights_info', reply));
    return { baseModel: info.base_model, isLora: info.is_lora, loraRank: info.lora_rank ?? null };
  }

  /** Deletes a training checkpoint of a model; 'absent' when the trainer has none of that name. */
  async deleteTrainingCheckpoint(modelId: string, name: string): Promise<'deleted' | 'absent'> {
    const reply = await this.request('DELETE', `training_runs/${encodeURIComponent(modelId)}/checkpoints/weights/${encodeURIComponent(name)}`);
    if (reply.status === 404) return 'absent';
    this.expectOk('delete checkpoint', reply);
    return 'deleted';
  }

  async listCheckpoints(modelId: string): Promise<z.infer<typeof ListCheckpointsResponse>['checkpoints']> {
    const reply = await this.request('GET', `training_runs/${encodeURIComponent(modelId)}/checkpoints`);
    return this.parseJson('list checkpoints', ListCheckpointsResponse, this.expectOk('list checkpoints', reply)).checkpoints;
  }

  /**
   * The bytes of a sampler checkpoint's archive (a .tar.gz), through the
   * archive endpoint: a 302 to the download (SkyRL, the sim) or a JSON
   * `{url}` (hosted Tinker). A checkpoint still being written (425) is waited for.
   */
  async downloadCheckpointArchive(tinkerPath: string, waitSeconds = 600): Promise<Buffer> {
    const parsed = parseTinkerPath(tinkerPath);
    if (!parsed) throw new TrainerError(`'${tinkerPath}' is not a tinker:// checkpoint path`, 'user');
    // Hosted Tinker names the checkpoint '<kind>/<name>'; SkyRL's route takes the bare name.
    const ids = parsed.kind ? [`${parsed.kind}/${parsed.name}`, parsed.name] : [parsed.name];
    const deadline = Date.now() + waitSeconds * 1000;
    for (let i = 0; ; ) {
      const id = ids[i];
      const path = `training_runs/${encodeURIComponent(parsed.modelId)}/checkpoints/${id.split('/').map(encodeURIComponent).join('/')}/archive`;
      const reply = await this.request('GET', path, undefined, { redirect: 'manual' });
      if (reply.status === 404 && i + 1 < ids.length) {
        i += 1;
        continue;
      }
      if (reply.status === 425) {
        if (Date.now() < deadline) {
          await this.pause(this.options.pollSeconds);
          continue;
        }
        throw new TrainerError(`trainer ${this.base}: checkpoint ${tinkerPath} is still being written after ${waitSeconds} s`, 'server');
      }
      let url: string;
      if (reply.status >= 300 && reply.status < 400 && reply.headers.get('location')) {
        url = new URL(reply.headers.get('location')!, `${this.base}/`).toString();
      } else {
        url = this.parseJson('checkpoint archive', CheckpointArchiveUrlResponse, this.expectOk('checkpoint archive', reply)).url;
      }
      const download = await this.fetchUrl(url);
      if (download.status !== 200) {
        throw new TrainerError(`trainer ${this.base}: downloading ${tinkerPath} from ${url}: HTTP ${download.status}: ${this.detail(download)}`, 'server');
      }
      return download.body;
    }
  }

  // ----------------------------------------------------------- internals

  /**
   * Waits until a checkpoint that already exists (a 409 on save) is listed as
   * complete; returns its path. The list shows completed checkpoints only, so
   * the archive endpoint tells one being written (425) from one whose save
   * failed (500 "Checkpoint creation failed"): that save was not applied.
   */
  private async awaitCheckpoint(modelId: string, name: string, kind: 'sampler' | 'training', waitSeconds: number): Promise<string> {
    const deadline = Date.now() + waitSeconds * 1000;
    const prefix = kind === 'sampler' ? 'sampler_weights' : 'weights';
    for (;;) {
      // SkyRL lists the bare name; hosted Tinker prefixes the kind ('sampler_weights/<name>').
      const found = (await this.listCheckpoints(modelId)).find(
        (c) => c.checkpoint_type === kind && (c.checkpoint_id === name || c.checkpoint_id === `${prefix}/${name}`),
      );
      if (found) return found.tinker_path;
      // A failed save (500 "Checkpoint creation failed") is told from one being written (425) by the archive
      // endpoint for sampler weights, by weights_info for a training state.
      const probe = kind === 'sampler'
        ? await this.request('GET', `training_runs/${encodeURIComponent(modelId)}/checkpoints/${encodeURIComponent(name)}/archive`, undefined, { redirect: 'manual' })
        : await this.request('POST', 'weights_info', { tinker_path: `tinker://${modelId}/weights/${name}` });
      if (probe.status >= 500 && /fail/i.test(this.detail(probe))) {
        throw new TrainerError(`trainer ${this.base}: ${kind === 'sampler' ? 'save_weights_for_sampler' : 'save_weights'} failed: checkpoint '${name}' of model ${modelId}: ${this.detail(probe)}`, 'server', true);
      }
      if (Date.now() > deadline) {
        throw new TrainerError(`trainer ${this.base}: checkpoint '${name}' of model ${modelId} exists but did not complete within ${waitSeconds} s`, 'server');
      }
      await this.pause(this.options.pollSeconds);
    }
  }

  /**
   * Sends an op (again, when its future is gone) and polls its future until
   * it resolves. `submit` returns null when the op needs no future (see
   * save_weights_for_sampler's 409).
   */
  /** `modelId`: the model the op trains or saves, which a "model not loaded" failure says is gone. */
  private runFuture(op: string, submit: () => Promise<FutureResponse | null>, modelId?: string): Promise<{ json?: unknown; proto?: Buffer }> {
    return timeTrainerOp(op, () => this.submitAndPoll(op, submit, modelId));
  }

  private async submitAndPoll(op: string, submit: () => Promise<FutureResponse | null>, modelId?: string): Promise<{ json?: unknown; proto?: Buffer }> {
    let future = await submit();
    if (future === null) return {};
    let resubmits = 0;
    let badRequests = 0;
    let serverErrors = 0;
    for (;;) {
      const polled = Date.now();
      const reply = await this.withConnectionRetries(op, () => this.retrieve(future!.request_id));
      if (reply === 'poll-again') {
        countTrainerRetry(op, 'poll_timeout');
        continue;
      }
      const { status } = reply;
      if (status < 500) serverErrors = 0;
      if (status === 200 && reply.contentType.startsWith(PROTOBUF_CONTENT_TYPE)) return { proto: reply.body };
      if (status === 200) {
        const json = this.parseBody(op, reply);
        if (TryAgain.safeParse(json).success) {
          countTrainerRetry(op, 'try_again');
          await this.pause(this.options.pollSeconds);
          continue;
        }
        const failed = RequestFailed.safeParse(json);
        if (failed.success) {
          if (MODEL_GONE.test(failed.data.error)) {
            if (modelId) throw new TrainerModelGoneError(this.modelGoneMessage(op, modelId, failed.data.error), modelId);
            throw new TrainerError(`trainer ${this.base}: ${op} failed: ${failed.data.error}: the trainer no longer has the model it names`, 'user', true);
          }
          throw new TrainerError(`trainer ${this.base}: ${op} failed: ${failed.data.error}`, failed.data.category?.toLowerCase() === 'user' ? 'user' : 'server', true);
        }
        return { json };
      }
      if (status === 408) {
        // A long poll that ended without a result; one answered at once (a proxy, a server without long polls) is paced.
        countTrainerRetry(op, 'poll_timeout');
        if (Date.now() - polled < 1000) await this.pause(this.options.pollSeconds);
        continue;
      }
      if (status >= 500) {
        if (++serverErrors > MAX_SERVER_ERROR_POLLS) {
          throw new TrainerError(`trainer ${this.base}: ${op}: retrieve_future failed ${serverErrors} times in a row: HTTP ${status}: ${this.detail(reply)}`, 'server');
        }
        countTrainerRetry(op, 'server_error');
        await this.pause(this.options.pollSeconds);
        continue;
      }
      if (status === 429) {
        countTrainerRetry(op, 'rate_limited');
        await this.pause(Math.max(1, this.options.pollSeconds));
        continue;
      }
      if (status === 410 || status === 404) {
        // The future is gone (the server restarted, or expired it): send the op again; its seq_id makes that exactly-once.
        if (++resubmits > MAX_RESUBMITS) throw new TrainerError(`trainer ${this.base}: ${op}: its future vanished ${resubmits} times (HTTP ${status})`, 'server');
        countTrainerRetry(op, 'future_gone');
        future = await submit();
        if (future === null) return {};
        continue;
      }
      if (status === 400 && ++badRequests <= MAX_BAD_REQUEST_POLLS) {
        countTrainerRetry(op, 'bad_request');
        continue;
      }
      // A 400 {detail} on retrieve_future is the future's failure (SkyRL); other answers say nothing of the op.
      if (status === 400 && modelId && MODEL_GONE.test(this.detail(reply))) {
        throw new TrainerModelGoneError(this.modelGoneMessage(op, modelId, this.detail(reply)), modelId);
      }
      throw new TrainerError(`trainer ${this.base}: ${op} failed: ${this.detail(reply)}`, status >= 400 && status < 500 ? 'user' : 'server', status === 400);
    }
  }

  /** Retries `attempt` while the server cannot be reached, with backoff; an unreachable server ends in one clear error. */
  private async withConnectionRetries<T>(op: string, attempt: () => Promise<T>): Promise<T> {
    for (let failures = 0; ; failures++) {
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof UnreachableError)) throw err;
        if (failures + 1 >= MAX_CONNECTION_FAILURES) {
          throw new TrainerError(`trainer ${this.base} is unreachable (${op}): ${err.message}`, 'server');
        }
        countTrainerRetry(routeOf(op), 'unreachable');
        await this.pause(Math.min(this.options.maxConnectionRetrySeconds ?? 30, (this.options.connectionRetrySeconds ?? 1) * 2 ** failures));
      }
    }
  }

  /** A request, sent again with backoff while the server cannot be reached. */
  private request(method: 'GET' | 'POST' | 'DELETE', op: string, body?: unknown, options: { redirect?: 'follow' | 'manual' } = {}): Promise<HttpReply> {
    return this.withConnectionRetries(op, () => this.send(method, op, body, options));
  }

  /** One retrieve_future request; 'poll-again' when our own timeout ended a long poll (the server may hold it for minutes). */
  private async retrieve(requestId: string): Promise<HttpReply | 'poll-again'> {
    try {
      return await this.send('POST', 'retrieve_future', { request_id: requestId }, { longPoll: true });
    } catch (err) {
      if (err instanceof PollTimeout) return 'poll-again';
      throw err;
    }
  }

  private async send(
    method: 'GET' | 'POST' | 'DELETE',
    op: string,
    body?: unknown,
    options: { longPoll?: boolean; redirect?: 'follow' | 'manual' } = {},
  ): Promise<HttpReply> {
    const headers: Record<string, string> = { 'x-api-key': this.options.apiKey, authorization: `Bearer ${this.options.apiKey}` };
    let payload: Uint8Array | string | undefined;
    if (body instanceof Uint8Array) {
      headers['content-type'] = PROTOBUF_CONTENT_TYPE;
      payload = body;
    } else if (body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    if (op === 'retrieve_future') headers.accept = `${PROTOBUF_CONTENT_TYPE}, application/json`;
    const timeoutSeconds = this.options.requestTimeoutSeconds ?? (options.longPoll ? 60 : 120);
    const timeout = AbortSignal.timeout(timeoutSeconds * 1000);
    const signal = this.options.signal ? AbortSignal.any([this.options.signal, timeout]) : timeout;
    try {
      const response = await fetch(`${this.base}/api/v1/${op}`, { method, headers, body: payload, signal, redirect: options.redirect ?? 'follow' });
      return {
        status: response.status,
        contentType: (response.headers.get('content-type') ?? '').toLowerCase(),
        headers: response.headers,
        body: Buffer.from(await response.arrayBuffer()),
      };
    } catch (err) {
      this.options.signal?.throwIfAborted();
      if (timeout.aborted) {
        if (options.longPoll) throw new PollTimeout();
        throw new UnreachableError(`no answer to ${op} within ${timeoutSeconds} s`);
      }
      throw new UnreachableError(describeFetchError(err));
    }
  }

  private async fetchUrl(url: string): Promise<HttpReply> {
    const signal = this.options.signal ? AbortSignal.any([this.options.signal, AbortSignal.timeout(600_000)]) : AbortSignal.timeout(600_000);
    try {
      const response = await fetch(url, { signal, headers: url.startsWith(this.base) ? { 'x-api-key': this.options.apiKey } : {} });
      return { status: response.status, contentType: response.headers.get('content-type') ?? '', headers: response.headers, body: Buffer.from(await response.arrayBuffer()) };
    } catch (err) {
      this.options.signal?.throwIfAborted();
      throw new TrainerError(`trainer ${this.base}: cannot download ${url}: ${describeFetchError(err)}`, 'server');
    }
  }

  /** expectOk for an op on a model: a 404 saying the model is not found means the trainer lost it. */
  private expectModelOk(op: string, modelId: string, reply: HttpReply): unknown {
    if (reply.status === 404 && MODEL_NOT_FOUND.test(this.detail(reply))) {
      throw new TrainerModelGoneError(this.modelGoneMessage(op, modelId, `HTTP 404: ${this.detail(reply)}`), modelId);
    }
    return this.expectOk(op, reply);
  }

  private modelGoneMessage(op: string, modelId: string, answer: string): string {
    return (
      `trainer ${this.base}: ${op} failed: ${answer}: the trainer no longer has model ${modelId} (it restarted without it, ` +
      'or the session that owned it went silent past its timeout); retrying cannot help: restore the run from a training checkpoint'
    );
  }

  private expectOk(op: string, reply: HttpReply): unknown {
    if (reply.status >= 200 && reply.status < 300) return this.parseBody(op, reply);
    const detail = this.detail(reply);
    if (reply.status === 409) {
      throw new TrainerError(
        `trainer ${this.base}: ${op}: HTTP 409: ${detail}: the model already had another request under this seq_id ` +
          '(another client trains this model, or the run store lost its trainer_ops ledger); the run cannot go on safely on this model',
        'user',
      );
    }
    const user = reply.status >= 400 && reply.status < 500 && reply.status !== 408 && reply.status !== 429;
    const hint = reply.status === 404 && !/model|session|checkpoint|future|sampler/i.test(detail)
      ? ` (no /api/v1/${op} there: is trainer.baseUrl a Tinker API server, such as SkyRL's or hosted Tinker?)`
      : '';
    throw new TrainerError(`trainer ${this.base}: ${op}: HTTP ${reply.status}: ${detail}${hint}`, user ? 'user' : 'server');
  }

  private parseBody(op: string, reply: HttpReply): unknown {
    if (reply.body.length === 0) return undefined;
    try {
      return JSON.parse(reply.body.toString('utf8'));
    } catch {
      throw new TrainerError(
        `trainer ${this.base}: ${op} answered HTTP ${reply.status} with a body that is not JSON (${reply.contentType || 'no content type'}): ` +
          `${reply.body.toString('utf8', 0, 200)}`,
        'user',
      );
    }
  }

  private parseJson<S extends z.ZodType>(op: string, schema: S, value: unknown): z.infer<S> {
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    throw new TrainerError(
      `trainer ${this.base}: ${op} answered with a body this client does not understand ` +
        `(is it a Tinker API server of SDK >= 0.25?):\n${formatZodError(parsed.error)}`,
      'user',
    );
  }

  private detail(reply: HttpReply): string {
    const text = reply.body.toString('utf8');
    try {
      return errorMessage(JSON.parse(text)) ?? text.slice(0, 500);
    } catch {
      return text.slice(0, 500) || '(no body)';
    }
  }

  private async pause(seconds: number): Promise<void> {
    await sleep(seconds * 1000, undefined, this.options.signal ? { signal: this.options.signal } : undefined);
  }
}

/** A metric label for a request: checkpoint routes name a model and a checkpoint, which would make a label per model. */
function routeOf(op: string): string {
  if (!op.startsWith('training_runs/')) return op;
  return op.endsWith('/archive') ? 'checkpoint_archive' : op.includes('/checkpoints/weights/') ? 'delete_checkpoint' : 'list_checkpoints';
}

class UnreachableError extends Error {}
class PollTimeout extends Error {}

function describeFetchError(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  if (cause?.code) return `${cause.code}${cause.message ? ` (${cause.message})` : ''}`;
  return cause?.message ?? (err as Error).message;
}
