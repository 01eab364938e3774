/**
 * The SIMULATED trainer's checkpoints (trainer-server.ts has the API):
 * save_weights_for_sampler and its archives, save_weights, load_weights,
 * weights_info, the checkpoint list and DELETE, as SkyRL answers them.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { parseTinkerPath, LoadWeightsRequest, SaveWeightsRequest, WeightsInfoRequest } from '../core/trainer/tinker/wire';
import { hashBody, SAFE_NAME, samplerWeightsUri } from './checkpoints';
import { SimTrainerUserError } from './learning-rule';
import type { SimHttpReply, SimHttpRequest } from './http';
import { SaveWeightsForSamplerBody, invalid, modelNotFound } from './trainer-requests';
import { SimTrainerState } from './trainer-state';

/** The SIMULATED trainer's checkpoint routes: sampler weights and training states saved, listed, downloaded, loaded and deleted. */
export abstract class SimTrainerCheckpoints extends SimTrainerState {
  protected async saveWeightsForSampler(rawBody: unknown): Promise<SimHttpReply> {
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
    if (samplingSessionId)
      this.samplingSessions.set(samplingSessionId, { sessionId: model.sessionId, basePath: `tinker://${modelId}/sampler_weights/${name}` });
    return this.submit('save_weights_for_sampler', modelId, body.seq_id ?? null, hashBody({ name }), async (state) => {
      try {
        await this.deps.store.writeSamplerWeightsOnce(
          {
            version: 1,
            modelId,
            name,
            baseModel: state.baseModel,
            optimSteps: state.optimSteps,
            savedAt: new Date().toISOString(),
            params: state.params,
          },
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
  protected async listCheckpoints(modelId: string): Promise<SimHttpReply> {
    if (!SAFE_NAME.test(modelId))
      return { status: 422, json: { detail: [{ loc: ['path', 'unique_id'], msg: 'String should match pattern' }] } };
    const saved = await this.deps.store.samplerCheckpoints(modelId);
    const states = await this.deps.store.trainingStates(modelId);
    return {
      status: 200,
      json: {
        checkpoints: [
          ...states.map((c) => ({
            checkpoint_id: c.name,
            checkpoint_type: 'training',
            time: c.savedAt.toISOString(),
            tinker_path: `tinker://${modelId}/weights/${c.name}`,
          })),
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
  protected async checkpointArchive(
    request: SimHttpRequest,
    modelId: string,
    checkpointId: string,
    kind: 'archive' | 'download',
  ): Promise<SimHttpReply> {
    const name = checkpointId.replace(/^sampler_weights\//, '');
    if (!SAFE_NAME.test(modelId) || !SAFE_NAME.test(name))
      return { status: 404, json: { detail: `Checkpoint not found: ${modelId}/${checkpointId}` } };
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

  /** What a training checkpoint is, from the checkpoint alone (its model may be long gone). */
  protected async weightsInfo(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = WeightsInfoRequest.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const path = parseTinkerPath(parsed.data.tinker_path);
    if (!path || path.kind !== 'weights')
      return { status: 400, json: { detail: 'Invalid tinker path format. Expected: tinker://model_id/weights/checkpoint_id' } };
    const unready = this.trainingStateUnready(path.modelId, path.name);
    if (unready) return unready;
    const saved = await this.deps.store.readTrainingState(path.modelId, path.name);
    if (!saved) return { status: 404, json: { detail: `Checkpoint not found: ${path.modelId}/${path.name}` } };
    return { status: 200, json: { base_model: saved.baseModel, is_lora: true, lora_rank: saved.lora.rank } };
  }

  /** 425 while a training checkpoint is being written, 500 when its save failed; null when neither. */
  protected trainingStateUnready(modelId: string, name: string): SimHttpReply | null {
    const key = `${modelId}/weights/${name}`;
    if (this.pendingCheckpoints.has(key)) return { status: 425, json: { detail: 'Checkpoint is still being created' } };
    const failed = this.failedCheckpoints.get(key);
    if (failed !== undefined) return { status: 500, json: { detail: `Checkpoint creation failed: ${failed}` } };
    return null;
  }

  // ------------------------------------------------------ training state

  /** The model's params and Adam moments under a name, kept apart from the live models. */
  protected async saveWeights(rawBody: unknown): Promise<SimHttpReply> {
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
          version: 1,
          modelId,
          name,
          baseModel: state.baseModel,
          lora: state.lora,
          optimSteps: state.optimSteps,
          savedAt: new Date().toISOString(),
          params: state.params,
          adam: state.adam,
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
  protected async loadWeights(rawBody: unknown): Promise<SimHttpReply> {
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
    if (!path || path.kind !== 'weights')
      return this.badRequest('request.path must be in format tinker://source_model_id/weights/checkpoint_id');
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
  protected async deleteCheckpoint(modelId: string, checkpointPath: string): Promise<SimHttpReply> {
    const match = /^(weights|sampler_weights)\/([^/]+)$/.exec(checkpointPath);
    if (!match) {
      return this.badRequest(
        "Invalid checkpoint identifier. Expected format 'weights/<name>' (training weights) or 'sampler_weights/<name>' (sampler weights)",
      );
    }
    const [, kind, name] = match;
    if (kind === 'sampler_weights')
      return this.badRequest(
        'the sim trainer keeps sampler weights for good (publishing reads them); only training checkpoints are deleted',
      );
    const key = `${modelId}/weights/${name}`;
    if (this.pendingCheckpoints.has(key)) return { status: 425, json: { detail: 'Checkpoint is still being created' } };
    // A failed save leaves no file but a record, which deleting frees (its name can be saved again), as SkyRL's row.
    const failed = this.failedCheckpoints.delete(key);
    if (!(await this.deps.store.deleteTrainingState(modelId, name)) && !failed)
      return { status: 404, json: { detail: `Checkpoint not found: ${modelId}/${name}` } };
    return { status: 204 };
  }
}
