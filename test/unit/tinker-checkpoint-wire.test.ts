/**
 * Training-state checkpoints on the Tinker wire (save_weights, load_weights,
 * weights_info, checkpoint listing) as SkyRL 0.4 and the SDK speak them, and
 * how the client reads a trainer that lost its model: the schemas, then the
 * client against a scripted in-process server answering in SkyRL's words.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TinkerClient, TrainerError, TrainerModelGoneError } from '../../core/trainer/tinker/client';
import {
  ListCheckpointsResponse,
  LoadWeightsRequest,
  parseTinkerPath,
  SaveWeightsRequest,
  SaveWeightsResult,
  WeightsInfoResponse,
} from '../../core/trainer/tinker/wire';

describe('training-state schemas', () => {
  test('a save_weights body names its checkpoint with letters, digits, "_" and "-"; seq_id and type are optional, as the SDK sends them', () => {
    expect(SaveWeightsRequest.parse({ model_id: 'model_1', path: 'state-3' })).toEqual({ model_id: 'model_1', path: 'state-3' });
    expect(SaveWeightsRequest.parse({ model_id: 'model_1', path: 'state_3', seq_id: 7, type: 'save_weights' })).toMatchObject({
      seq_id: 7,
    });
    expect(SaveWeightsRequest.safeParse({ model_id: 'model_1', path: '../state' }).success).toBe(false);
    expect(SaveWeightsRequest.safeParse({ model_id: 'model_1', path: 'a/b' }).success).toBe(false);
  });

  test('a load_weights body loads the optimizer state unless told not to', () => {
    const path = 'tinker://model_1/weights/state-3';
    expect(LoadWeightsRequest.parse({ model_id: 'model_2', path })).toMatchObject({ optimizer: true });
    expect(LoadWeightsRequest.parse({ model_id: 'model_2', path, optimizer: false, seq_id: 1, type: 'load_weights' })).toMatchObject({
      optimizer: false,
      seq_id: 1,
    });
  });

  test('a save_weights result is a tinker://<model>/weights/<name> path; a sampler path is not one', () => {
    expect(SaveWeightsResult.parse({ path: 'tinker://model_1/weights/state-3', type: 'save_weights' }).path).toBe(
      'tinker://model_1/weights/state-3',
    );
    expect(SaveWeightsResult.safeParse({ path: 'tinker://model_1/sampler_weights/state-3' }).success).toBe(false);
    expect(SaveWeightsResult.safeParse({ path: 'tinker://model_1/state-3' }).success).toBe(false);
    expect(parseTinkerPath('tinker://model_1/weights/state-3')).toEqual({ modelId: 'model_1', kind: 'weights', name: 'state-3' });
  });

  test('a checkpoint listing holds training and sampler checkpoints, and nothing of another type', () => {
    const listing = {
      checkpoints: [
        { checkpoint_id: 'state-3', checkpoint_type: 'training', time: '2026-01-01T00:00:00Z', tinker_path: 'tinker://m/weights/state-3' },
        {
          checkpoint_id: 'step-3',
          checkpoint_type: 'sampler',
          time: '2026-01-01T00:00:00Z',
          tinker_path: 'tinker://m/sampler_weights/step-3',
        },
      ],
    };
    expect(ListCheckpointsResponse.parse(listing).checkpoints.map((c) => c.checkpoint_type)).toEqual(['training', 'sampler']);
    expect(ListCheckpointsResponse.safeParse({ checkpoints: [{ ...listing.checkpoints[0], checkpoint_type: 'optimizer' }] }).success).toBe(
      false,
    );
  });

  test('weights_info answers a base model, whether it is LoRA, and a rank that may be absent', () => {
    expect(WeightsInfoResponse.parse({ base_model: 'Qwen/Qwen3-0.6B', is_lora: true, lora_rank: 8 })).toEqual({
      base_model: 'Qwen/Qwen3-0.6B',
      is_lora: true,
      lora_rank: 8,
    });
    expect(WeightsInfoResponse.parse({ base_model: 'Qwen/Qwen3-0.6B', is_lora: false, lora_rank: null }).lora_rank).toBeNull();
  });
});

describe('the client against a trainer answering in SkyRL 0.4 words', () => {
  type Route = (body: Record<string, unknown>) => { status: number; json?: unknown };
  let routes: Record<string, Route> = {};
  let server: Server;
  let client: TinkerClient;

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const route = routes[`${req.method} ${new URL(req.url ?? '/', 'http://x').pathname}`];
        const reply = route
          ? route(text ? (JSON.parse(text) as Record<string, unknown>) : {})
          : { status: 404, json: { detail: 'Not Found' } };
        res.writeHead(reply.status, reply.json === undefined ? {} : { 'content-type': 'application/json' });
        res.end(reply.json === undefined ? undefined : JSON.stringify(reply.json));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = new TinkerClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'k', pollSeconds: 0.001 });
  });
  beforeEach(() => {
    routes = {};
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  const future = () => ({ status: 200, json: { request_id: '1', future_id: '1', status: 'pending' } });

  test('a save of a model the trainer does not know (404 "Model \'<id>\' not found") is TrainerModelGoneError for that model', async () => {
    routes['POST /api/v1/save_weights'] = () => ({ status: 404, json: { detail: "Model 'model_a' not found" } });
    const error = await client.saveWeights({ modelId: 'model_a', seqId: 4, name: 'state-4' }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(TrainerModelGoneError);
    expect(error).toMatchObject({ modelId: 'model_a', category: 'user', opFailed: true });
  });

  test('an op whose future fails with "Model <id> not loaded" (a restarted SkyRL) is TrainerModelGoneError saying the trainer no longer has the model', async () => {
    routes['POST /api/v1/optim_step'] = future;
    routes['POST /api/v1/retrieve_future'] = () => ({
      status: 400,
      json: { detail: 'Model model_a not loaded (likely stale request from previous server)' },
    });
    const error = await client
      .optimStep({
        modelId: 'model_a',
        seqId: 5,
        adam: { learning_rate: 1e-4, beta1: 0.9, beta2: 0.95, eps: 1e-12, weight_decay: 0, grad_clip_norm: 0 },
      })
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(TrainerModelGoneError);
    expect(error).toMatchObject({ modelId: 'model_a', opFailed: true });
    expect((error as Error).message).toContain('the trainer no longer has model model_a');
  });

  test('an unknown checkpoint on load_weights (404 "Checkpoint not found") is a TrainerError, not a lost model', async () => {
    routes['POST /api/v1/load_weights'] = () => ({ status: 404, json: { detail: 'Checkpoint not found: model_a/state-1' } });
    const error = await client
      .loadWeights({ modelId: 'model_b', seqId: 1, path: 'tinker://model_a/weights/state-1', optimizer: true })
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(TrainerError);
    expect(error).not.toBeInstanceOf(TrainerModelGoneError);
    expect((error as Error).message).toContain('HTTP 404: Checkpoint not found: model_a/state-1');
  });

  test('a model not found on unload is no lost model: unloading one the trainer forgot is no loss', async () => {
    routes['POST /api/v1/unload_model'] = () => ({ status: 404, json: { detail: 'Model not found' } });
    const error = await client.unloadModel('model_a').catch((err: unknown) => err);
    expect(error).toBeInstanceOf(TrainerError);
    expect(error).not.toBeInstanceOf(TrainerModelGoneError);
  });

  test('a retried save (409) returns the checkpoint once it is listed as a training checkpoint', async () => {
    let listings = 0;
    routes['POST /api/v1/save_weights'] = () => ({
      status: 409,
      json: { detail: "Checkpoint 'state-4' already exists for model 'model_a'" },
    });
    routes['POST /api/v1/weights_info'] = () => ({ status: 425, json: { detail: 'Checkpoint is still being created' } });
    routes['GET /api/v1/training_runs/model_a/checkpoints'] = () => ({
      status: 200,
      json: {
        checkpoints: [
          // A sampler checkpoint of the same name is another checkpoint.
          { checkpoint_id: 'state-4', checkpoint_type: 'sampler', tinker_path: 'tinker://model_a/sampler_weights/state-4' },
          ...(++listings >= 3
            ? [{ checkpoint_id: 'state-4', checkpoint_type: 'training', tinker_path: 'tinker://model_a/weights/state-4' }]
            : []),
        ],
      },
    });
    expect(await client.saveWeights({ modelId: 'model_a', seqId: 4, name: 'state-4' })).toBe('tinker://model_a/weights/state-4');
    expect(listings).toBe(3);
  });

  test('a retried save whose checkpoint failed (weights_info 500 "Checkpoint creation failed") throws with opFailed, to be saved under a new name', async () => {
    routes['POST /api/v1/save_weights'] = () => ({
      status: 409,
      json: { detail: "Checkpoint 'state-4' already exists for model 'model_a'" },
    });
    routes['GET /api/v1/training_runs/model_a/checkpoints'] = () => ({ status: 200, json: { checkpoints: [] } });
    routes['POST /api/v1/weights_info'] = () => ({ status: 500, json: { detail: 'Checkpoint creation failed: disk full' } });
    const error = await client.saveWeights({ modelId: 'model_a', seqId: 4, name: 'state-4' }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(TrainerError);
    expect(error).not.toBeInstanceOf(TrainerModelGoneError);
    expect(error).toMatchObject({ opFailed: true });
    expect((error as Error).message).toContain('save_weights failed');
  });

  test('deleting a training checkpoint goes to its weights/<name> route: 204 is deleted, 404 absent', async () => {
    routes['DELETE /api/v1/training_runs/model_a/checkpoints/weights/state-4'] = () => ({ status: 204 });
    expect(await client.deleteTrainingCheckpoint('model_a', 'state-4')).toBe('deleted');
    routes['DELETE /api/v1/training_runs/model_a/checkpoints/weights/state-4'] = () => ({
      status: 404,
      json: { detail: 'Checkpoint not found: model_a/state-4' },
    });
    expect(await client.deleteTrainingCheckpoint('model_a', 'state-4')).toBe('absent');
  });
});
