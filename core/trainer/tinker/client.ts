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
 * Every reply is validated (zod for JSON, the .proto for protobuf). The
 * errors are in errors.ts, the polling of futures in futures.ts, the HTTP
 * transport in transport.ts.
 */
import { z } from 'zod';
import {
  type AdamParams,
  CheckpointArchiveUrlResponse,
  CreateModelResponse,
  CreateModelResult,
  CreateSessionResponse,
  decodeForwardBackwardResult,
  encodeForwardBackwardRequest,
  type ForwardBackwardResult,
  FutureResponse,
  ListCheckpointsResponse,
  type LoraConfig,
  OptimStepResult,
  parseTinkerPath,
  SaveWeightsForSamplerResult,
  SaveWeightsResult,
  TINKER_SDK_WIRE_VERSION,
  TinkerWireError,
  type WireDatum,
  WeightsInfoResponse,
} from './wire';
import { TrainerError } from './errors';
import { TinkerFutures } from './futures';
import { type HttpReply, UnreachableError } from './transport';

export { TrainerError, TrainerModelGoneError } from './errors';
export type { TinkerClientOptions } from './transport';

export class TinkerClient extends TinkerFutures {
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
      if (err instanceof UnreachableError)
        throw new TrainerError(`trainer ${this.base} is unreachable (session_heartbeat): ${err.message}`, 'server');
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
      const created = this.parseJson(
        'create_model',
        CreateModelResponse,
        this.expectOk('create_model', await this.request('POST', 'create_model', body)),
      );
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
      this.parseJson(
        'unload_model',
        FutureResponse,
        this.expectOk('unload_model', await this.request('POST', 'unload_model', { model_id: modelId, type: 'unload_model' })),
      ),
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
    const result = await this.runFuture(
      op,
      async () => {
        const reply = await this.request('POST', 'forward_backward', body);
        if (reply.status === 415) {
          throw new TrainerError(
            `trainer ${this.base}: forward_backward refused the protobuf body (HTTP 415: ${this.detail(reply)}); ` +
              'this client speaks the Tinker API of SDK >= 0.25 (protobuf forward_backward); the server speaks an older one',
            'user',
          );
        }
        return this.parseJson(op, FutureResponse, this.expectModelOk(op, args.modelId, reply));
      },
      args.modelId,
    );
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
      async () =>
        this.parseJson(
          'optim_step',
          FutureResponse,
          this.expectModelOk('optim_step', args.modelId, await this.request('POST', 'optim_step', body)),
        ),
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
    const result = await this.runFuture(
      'save_weights_for_sampler',
      async () => {
        const reply = await this.request('POST', 'save_weights_for_sampler', body);
        if (reply.status === 409) {
          exists = true;
          return null;
        }
        return this.parseJson(
          'save_weights_for_sampler',
          FutureResponse,
          this.expectModelOk('save_weights_for_sampler', args.modelId, reply),
        );
      },
      args.modelId,
    );
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
    const result = await this.runFuture(
      'save_weights',
      async () => {
        const reply = await this.request('POST', 'save_weights', body);
        if (reply.status === 409) {
          exists = true;
          return null;
        }
        return this.parseJson('save_weights', FutureResponse, this.expectModelOk('save_weights', args.modelId, reply));
      },
      args.modelId,
    );
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
      async () =>
        this.parseJson(
          'load_weights',
          FutureResponse,
          this.expectModelOk('load_weights', args.modelId, await this.request('POST', 'load_weights', body)),
        ),
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
    const reply = await this.request(
      'DELETE',
      `training_runs/${encodeURIComponent(modelId)}/checkpoints/weights/${encodeURIComponent(name)}`,
    );
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
    for (let i = 0; ;) {
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
        throw new TrainerError(
          `trainer ${this.base}: downloading ${tinkerPath} from ${url}: HTTP ${download.status}: ${this.detail(download)}`,
          'server',
        );
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
      const probe =
        kind === 'sampler'
          ? await this.request(
              'GET',
              `training_runs/${encodeURIComponent(modelId)}/checkpoints/${encodeURIComponent(name)}/archive`,
              undefined,
              { redirect: 'manual' },
            )
          : await this.request('POST', 'weights_info', { tinker_path: `tinker://${modelId}/weights/${name}` });
      if (probe.status >= 500 && /fail/i.test(this.detail(probe))) {
        throw new TrainerError(
          `trainer ${this.base}: ${kind === 'sampler' ? 'save_weights_for_sampler' : 'save_weights'} failed: checkpoint '${name}' of model ${modelId}: ${this.detail(probe)}`,
          'server',
          true,
        );
      }
      if (Date.now() > deadline) {
        throw new TrainerError(
          `trainer ${this.base}: checkpoint '${name}' of model ${modelId} exists but did not complete within ${waitSeconds} s`,
          'server',
        );
      }
      await this.pause(this.options.pollSeconds);
    }
  }
}
