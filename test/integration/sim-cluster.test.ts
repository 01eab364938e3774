/**
 * The SIMULATED cluster, in-process on a free port, spoken to through the
 * real `openai` client (vLLM subset) and plain fetch (Tinker subset).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { BadRequestError, NotFoundError } from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import pino from 'pino';
import { loadSimWorld } from '../../core/envs/sim/world';
import { type SimCluster, startSimCluster } from '../../workers/sim-cluster/server';
import { SimClusterStore } from '../../workers/sim-cluster/checkpoints';
import { SimTrainerServer } from '../../workers/sim-cluster/trainer-server';

const world = loadSimWorld();
const BASE = world.model.name;
const silent = pino({ level: 'silent' });

type VllmCompletion = ChatCompletion & {
  prompt_token_ids?: number[];
  choices: Array<ChatCompletion.Choice & { token_ids?: number[] }>;
};

const taskMessages: ChatMessageList = [
  { role: 'system', content: 'You are a SIMULATED agent. Answer with one action per turn.' },
  { role: 'user', content: '[SIMULATED] Task lookup-1 kind lookup: find one value in a table' },
];
type ChatMessageList = ChatCompletionMessageParam[];

const ADAM = { learning_rate: 0.1, beta1: 0.9, beta2: 0.95, eps: 1e-8 };

const tempDirs: string[] = [];
function tempDataDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sim-cluster-test-'));
  tempDirs.push(dir);
  return dir;
}
afterAll(() => tempDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function openai(cluster: SimCluster): OpenAI {
  return new OpenAI({ baseURL: `${cluster.url}/v1`, apiKey: 'sim', maxRetries: 0 });
}

async function complete(cluster: SimCluster, model: string, messages: ChatMessageList, seed = 3): Promise<VllmCompletion> {
  const params: ChatCompletionCreateParamsNonStreaming & { return_token_ids: boolean } = {
    model,
    messages,
    seed,
    logprobs: true,
    top_logprobs: 20,
    return_token_ids: true,
  };
  return (await openai(cluster).chat.completions.create(params)) as VllmCompletion;
}

/** The log-prob of `behaviour` in the behaviour slot (the second completion token) of a response. */
function behaviourLogprob(completion: VllmCompletion, behaviour: string): number {
  const alternatives = completion.choices[0].logprobs!.content![1].top_logprobs;
  const entry = alternatives.find((alt) => alt.token === behaviour);
  if (!entry) throw new Error(`'${behaviour}' is not among the behaviour slot's alternatives`);
  return entry.logprob;
}

/** The fields the tests read from a sim cluster JSON reply (vLLM errors, Tinker futures and errors). */
interface Reply {
  request_id: string;
  model_id: string;
  type: string;
  detail: string;
  optim_steps: number;
  error: { message: string; type: string; code: number };
}

/** The fields the tests read from a finished future. */
interface FutureResult {
  model_id: string;
  path: string;
  error?: string;
  category?: string;
  metrics: Record<string, number>;
  loss_fn_outputs: Array<{ logprobs: { data: number[] } }>;
}

async function post(cluster: SimCluster, route: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${cluster.url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  const json = (response.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : undefined) as Reply;
  return { status: response.status, json, text };
}

/** Polls retrieve_future until the op is done, as a Tinker client does. */
async function awaitFuture(cluster: SimCluster, requestId: string): Promise<FutureResult> {
  for (;;) {
    const { status, json } = await post(cluster, '/api/v1/retrieve_future', { request_id: requestId });
    if (status !== 408) {
      expect(status).toBe(200);
      return json as unknown as FutureResult;
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Submits a Tinker op, checks it was accepted, and returns its result. */
async function trainerOp(cluster: SimCluster, op: string, body: unknown, idempotencyKey?: string) {
  const headers: Record<string, string> = idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : {};
  const submitted = await post(cluster, `/api/v1/${op}`, body, headers);
  expect(submitted.status).toBe(200);
  const result = await awaitFuture(cluster, submitted.json.request_id);
  expect(result.error).toBeUndefined();
  return { ref: { request_id: submitted.json.request_id, model_id: submitted.json.model_id }, result };
}

async function createModel(cluster: SimCluster): Promise<string> {
  return (await trainerOp(cluster, 'create_model', { base_model: BASE, lora_config: { rank: 8 } })).result.model_id;
}

/**
 * A Datum for one sampled turn (model_input = tokens[:-1], targets =
 * tokens[1:]), with advantage +1 on the behaviour token only.
 */
function behaviourDatum(completion: VllmCompletion) {
  const prompt = completion.prompt_token_ids!;
  const generated = completion.choices[0].token_ids!;
  const sampled = completion.choices[0].logprobs!.content!.map((entry) => entry.logprob);
  const tokens = [...prompt, ...generated];
  const n = tokens.length - 1;
  const logprobs = tokens.slice(1).map((_, j) => (j + 1 >= prompt.length ? sampled[j + 1 - prompt.length] : 0));
  const advantages = tokens.slice(1).map((_, j) => (j + 1 === prompt.length + 1 ? 1 : 0));
  const tensor = (data: number[], dtype: 'int64' | 'float32') => ({ data, dtype, shape: [n] });
  return {
    model_input: { chunks: [{ type: 'encoded_text', tokens: tokens.slice(0, -1) }] },
    loss_fn_inputs: {
      target_tokens: tensor(tokens.slice(1), 'int64'),
      logprobs: tensor(logprobs, 'float32'),
      advantages: tensor(advantages, 'float32'),
    },
  };
}

function forwardBackwardBody(modelId: string, data: unknown[]) {
  return { model_id: modelId, forward_backward_input: { data, loss_fn: 'importance_sampling' } };
}

/** create_model -> forward_backward -> optim_step -> save_weights_for_sampler -> load_lora_adapter. */
async function trainOneStep(cluster: SimCluster, adapterName: string) {
  const sampled = await complete(cluster, BASE, taskMessages);
  const behaviour = sampled.choices[0].message.content!.split(' ')[1];
  const modelId = await createModel(cluster);
  const fb = await trainerOp(cluster, 'forward_backward', forwardBackwardBody(modelId, [behaviourDatum(sampled)]));
  const optim = await trainerOp(cluster, 'optim_step', { model_id: modelId, adam_params: ADAM });
  const saved = await trainerOp(cluster, 'save_weights_for_sampler', { model_id: modelId, path: 'step-1' });
  const load = await post(cluster, '/v1/load_lora_adapter', { lora_name: adapterName, lora_path: saved.result.path });
  expect(load).toMatchObject({ status: 200, text: `Success: LoRA adapter '${adapterName}' added successfully.` });
  return { sampled, behaviour, modelId, fb, optim, saved };
}

describe('sim cluster', () => {
  let cluster: SimCluster;
  beforeAll(async () => {
    cluster = await startSimCluster({ world, dataDir: tempDataDir(), port: 0, logger: silent });
  });
  afterAll(() => cluster.close());

  it('answers the openai client with logprobs, token ids and prompt token ids, each turn extending the last', async () => {
    const turn1 = await complete(cluster, BASE, taskMessages);
    const choice = turn1.choices[0];
    expect(choice.message.content).toMatch(/^(Action|Maybe): \w+$/);
    expect(choice.finish_reason).toBe('stop');
    expect(choice.token_ids).toHaveLength(3);
    expect(choice.logprobs!.content!.map((entry) => entry.token).slice(0, 2).join(' ')).toBe(choice.message.content);
    expect(choice.logprobs!.content![2]).toMatchObject({ token: '<|end|>', logprob: 0 });
    expect(turn1.prompt_token_ids).toHaveLength(turn1.usage!.prompt_tokens);

    const turn2 = await complete(cluster, BASE, [
      ...taskMessages,
      { role: 'assistant', content: choice.message.content },
      { role: 'user', content: 'Observation: inspect_schema done' },
    ]);
    const turn1Tokens = [...turn1.prompt_token_ids!, ...choice.token_ids!];
    expect(turn2.prompt_token_ids!.slice(0, turn1Tokens.length)).toEqual(turn1Tokens);
  });

  it('gives the same completion for the same seed', async () => {
    const a = await complete(cluster, BASE, taskMessages, 11);
    const b = await complete(cluster, BASE, taskMessages, 11);
    expect(b.choices[0].token_ids).toEqual(a.choices[0].token_ids);
  });

  it('lists the base model and every loaded adapter under /v1/models', async () => {
    await trainOneStep(cluster, 'listed-step-1');
    const models = await openai(cluster).models.list();
    const byId = new Map(models.data.map((m) => [m.id, m as unknown as Record<string, unknown>]));
    expect(byId.get(BASE)).toMatchObject({ object: 'model', owned_by: 'sim' });
    expect(byId.get('listed-step-1')).toMatchObject({ parent: BASE });
  });

  it('makes the openai client throw NotFoundError (404) for a model that is neither the base nor a loaded adapter', async () => {
    const request = openai(cluster).chat.completions.create({ model: 'no-such-model', messages: taskMessages });
    await expect(request).rejects.toBeInstanceOf(NotFoundError);
    await expect(request).rejects.toMatchObject({ status: 404, message: expect.stringContaining('no-such-model') });
  });

  it('raises the trained behaviour under the new adapter after one positive-advantage training step', async () => {
    const { sampled, behaviour, fb, optim } = await trainOneStep(cluster, 'run-a-step-1');
    expect(fb.result.metrics['loss:sum']).toBeCloseTo(-1, 9); // on-policy: ratio 1, advantage 1
    expect(optim.result.metrics['optim/step']).toBe(1);
    expect(optim.result.metrics.grad_norm).toBeGreaterThan(0);

    const trained = await complete(cluster, 'run-a-step-1', taskMessages);
    expect(behaviourLogprob(trained, behaviour)).toBeGreaterThan(behaviourLogprob(sampled, behaviour));
    expect(behaviourLogprob(await complete(cluster, BASE, taskMessages), behaviour)).toBeCloseTo(behaviourLogprob(sampled, behaviour), 12);
  });

  it('reports the new policy log-prob of each model token from forward_backward', async () => {
    const sampled = await complete(cluster, BASE, taskMessages);
    const modelId = await createModel(cluster);
    const { result } = await trainerOp(cluster, 'forward_backward', forwardBackwardBody(modelId, [behaviourDatum(sampled)]));
    const logprobs: number[] = result.loss_fn_outputs[0].logprobs.data;
    const promptLength = sampled.prompt_token_ids!.length;
    const sampledLogprobs = sampled.choices[0].logprobs!.content!.map((entry) => entry.logprob);
    expect(logprobs.slice(promptLength - 1)).toEqual(sampledLogprobs.map((lp) => expect.closeTo(lp, 12)));
    expect(logprobs.slice(0, promptLength - 1).every((lp) => lp === 0)).toBe(true);
  });

  it('applies a forward_backward repeated with the same Idempotency-Key once', async () => {
    const sampled = await complete(cluster, BASE, taskMessages);
    const body = (modelId: string) => forwardBackwardBody(modelId, [behaviourDatum(sampled)]);

    const once = await createModel(cluster);
    await trainerOp(cluster, 'forward_backward', body(once), 'fb-once');
    const onceStep = await trainerOp(cluster, 'optim_step', { model_id: once, adam_params: ADAM });

    const twice = await createModel(cluster);
    const first = await trainerOp(cluster, 'forward_backward', body(twice), 'fb-twice');
    const repeat = await trainerOp(cluster, 'forward_backward', body(twice), 'fb-twice');
    expect(repeat.ref).toEqual(first.ref);
    const twiceStep = await trainerOp(cluster, 'optim_step', { model_id: twice, adam_params: ADAM });

    expect(twiceStep.result.metrics.grad_norm).toBeGreaterThan(0);
    expect(twiceStep.result.metrics.grad_norm).toBeCloseTo(onceStep.result.metrics.grad_norm, 12);
  });

  it('steps once for an optim_step repeated with the same Idempotency-Key', async () => {
    const modelId = await createModel(cluster);
    await trainerOp(cluster, 'optim_step', { model_id: modelId, adam_params: ADAM }, 'step-key');
    await trainerOp(cluster, 'optim_step', { model_id: modelId, adam_params: ADAM }, 'step-key');
    expect((await post(cluster, '/api/v1/get_info', { model_id: modelId })).json).toMatchObject({
      model_id: modelId,
      model_data: { model_name: BASE },
      optim_steps: 1,
    });
  });

  it('keeps the first weights when the same sampler-weights name is saved twice', async () => {
    const { modelId, saved, behaviour } = await trainOneStep(cluster, 'keep-first-step-1');
    await trainerOp(cluster, 'optim_step', { model_id: modelId, adam_params: ADAM });
    const again = await trainerOp(cluster, 'save_weights_for_sampler', { model_id: modelId, path: 'step-1' });
    expect(again.result.path).toBe(saved.result.path);
    const reloaded = await post(cluster, '/v1/load_lora_adapter', { lora_name: 'keep-first-again', lora_path: again.result.path });
    expect(reloaded.status).toBe(200);
    const first = await complete(cluster, 'keep-first-step-1', taskMessages);
    const second = await complete(cluster, 'keep-first-again', taskMessages);
    expect(behaviourLogprob(second, behaviour)).toBe(behaviourLogprob(first, behaviour));
  });

  it('refuses to load an adapter name twice, and an unknown lora_path, as vLLM does', async () => {
    const { saved } = await trainOneStep(cluster, 'twice-step-1');
    const again = await post(cluster, '/v1/load_lora_adapter', { lora_name: 'twice-step-1', lora_path: saved.result.path });
    expect(again.status).toBe(400);
    expect(again.json.error.message).toContain('has already been loaded');
    const unknown = await post(cluster, '/v1/load_lora_adapter', { lora_name: 'ghost', lora_path: 'tinker://nope/sampler_weights/step-9' });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.type).toBe('NotFoundError');
  });

  it('unloads an adapter, after which it is an unknown model', async () => {
    await trainOneStep(cluster, 'unload-step-1');
    const unload = await post(cluster, '/v1/unload_lora_adapter', { lora_name: 'unload-step-1' });
    expect(unload).toMatchObject({ status: 200, text: "Success: LoRA adapter 'unload-step-1' removed successfully." });
    await expect(complete(cluster, 'unload-step-1', taskMessages)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('answers a future of an unknown request_id with 404', async () => {
    expect((await post(cluster, '/api/v1/retrieve_future', { request_id: 'req-unknown' })).status).toBe(404);
  });

  it('fails a forward_backward whose advantage sits on a token the policy cannot produce, naming datum and position', async () => {
    const sampled = await complete(cluster, BASE, taskMessages);
    const datum = behaviourDatum(sampled);
    datum.loss_fn_inputs.advantages.data[0] = 1; // target 1 is a prompt token
    const modelId = await createModel(cluster);
    const submitted = await post(cluster, '/api/v1/forward_backward', forwardBackwardBody(modelId, [datum]));
    const result = await awaitFuture(cluster, submitted.json.request_id);
    expect(result).toMatchObject({ category: 'user', error: expect.stringContaining('datum 0, position 0') });
  });

  describe('rejects bad bodies with HTTP 400 naming the field', () => {
    it('chat completions without messages (vLLM error shape)', async () => {
      const response = await post(cluster, '/v1/chat/completions', { model: BASE });
      expect(response.status).toBe(400);
      expect(response.json.error).toMatchObject({ type: 'BadRequestError', code: 400, message: expect.stringContaining('messages') });
    });

    it('chat completions asking for n=2, through the openai client', async () => {
      const request = openai(cluster).chat.completions.create({ model: BASE, messages: taskMessages, n: 2 });
      await expect(request).rejects.toBeInstanceOf(BadRequestError);
      await expect(request).rejects.toMatchObject({ message: expect.stringContaining('n:') });
    });

    it('chat completions whose task line names no kind', async () => {
      const response = await post(cluster, '/v1/chat/completions', {
        model: BASE,
        messages: [{ role: 'user', content: '[SIMULATED] Task x kind baking: bread' }],
      });
      expect(response.status).toBe(400);
      expect(response.json.error.message).toContain('names no task kind');
    });

    it('load_lora_adapter without lora_path', async () => {
      const response = await post(cluster, '/v1/load_lora_adapter', { lora_name: 'x' });
      expect(response.status).toBe(400);
      expect(response.json.error.message).toContain('lora_path');
    });

    it('a body that is not JSON', async () => {
      const response = await post(cluster, '/api/v1/create_model', '{not json');
      expect(response.status).toBe(400);
      expect(response.json.detail).toContain('not valid JSON');
    });

    it('create_model for another base model', async () => {
      const response = await post(cluster, '/api/v1/create_model', { base_model: 'Qwen/Qwen3-8B' });
      expect(response.status).toBe(400);
      expect(response.json.detail).toContain('base_model');
    });

    it('forward_backward whose advantages do not match the input length', async () => {
      const datum = behaviourDatum(await complete(cluster, BASE, taskMessages));
      datum.loss_fn_inputs.advantages.data.pop();
      datum.loss_fn_inputs.advantages.shape = [datum.loss_fn_inputs.advantages.data.length];
      const modelId = await createModel(cluster);
      const response = await post(cluster, '/api/v1/forward_backward', forwardBackwardBody(modelId, [datum]));
      expect(response.status).toBe(400);
      expect(response.json.detail).toContain('data.0.loss_fn_inputs.advantages');
    });

    it('forward_backward with a shape that does not match its data', async () => {
      const datum = behaviourDatum(await complete(cluster, BASE, taskMessages));
      datum.loss_fn_inputs.logprobs.shape = [2];
      const modelId = await createModel(cluster);
      const response = await post(cluster, '/api/v1/forward_backward', forwardBackwardBody(modelId, [datum]));
      expect(response.status).toBe(400);
      expect(response.json.detail).toContain('data.0.loss_fn_inputs.logprobs.shape');
    });

    it('forward_backward with an unsupported loss', async () => {
      const modelId = await createModel(cluster);
      const response = await post(cluster, '/api/v1/forward_backward', {
        model_id: modelId,
        forward_backward_input: { data: [], loss_fn: 'cross_entropy' },
      });
      expect(response.status).toBe(400);
      expect(response.json.detail).toContain("loss_fn 'cross_entropy' is not supported");
    });

    it('optim_step without a learning rate', async () => {
      const modelId = await createModel(cluster);
      const response = await post(cluster, '/api/v1/optim_step', { model_id: modelId, adam_params: { beta1: 0.9 } });
      expect(response.status).toBe(400);
      expect(response.json.detail).toContain('adam_params.learning_rate');
    });
  });
});

describe('sim cluster with slow training ops', () => {
  it('answers try_again (HTTP 408) while an op is still running', async () => {
    const cluster = await startSimCluster({ world, dataDir: tempDataDir(), logger: silent, trainerOpDelayMs: 300 });
    try {
      const submitted = await post(cluster, '/api/v1/create_model', { base_model: BASE });
      const early = await post(cluster, '/api/v1/retrieve_future', { request_id: submitted.json.request_id });
      expect(early.status).toBe(408);
      expect(early.json).toMatchObject({ type: 'try_again', request_id: submitted.json.request_id });
      expect(await awaitFuture(cluster, submitted.json.request_id)).toEqual({ model_id: submitted.json.model_id });
    } finally {
      await cluster.close();
    }
  });
});

describe('sim cluster restarted on the same data directory', () => {
  it('still serves the loaded adapter and continues the training model', async () => {
    const dataDir = tempDataDir();
    const before = await startSimCluster({ world, dataDir, logger: silent });
    let trainedLogprob: number;
    let step: Awaited<ReturnType<typeof trainOneStep>>;
    try {
      step = await trainOneStep(before, 'restart-step-1');
      trainedLogprob = behaviourLogprob(await complete(before, 'restart-step-1', taskMessages), step.behaviour);
      await post(before, '/api/v1/forward_backward', forwardBackwardBody(step.modelId, [behaviourDatum(step.sampled)]), {
        'Idempotency-Key': 'fb-before-restart',
      });
    } finally {
      await before.close();
    }

    const after = await startSimCluster({ world, dataDir, logger: silent });
    try {
      expect((await openai(after).models.list()).data.map((m) => m.id)).toContain('restart-step-1');
      const served = await complete(after, 'restart-step-1', taskMessages);
      expect(behaviourLogprob(served, step.behaviour)).toBe(trainedLogprob);

      expect(await awaitFuture(after, step.optim.ref.request_id)).toEqual(step.optim.result);
      expect((await post(after, '/api/v1/get_info', { model_id: step.modelId })).json.optim_steps).toBe(1);

      // The gradient accumulated before the restart is still there; its retry is not applied again.
      const retry = await trainerOp(after, 'forward_backward', forwardBackwardBody(step.modelId, []), 'fb-before-restart');
      expect(retry.result.loss_fn_outputs).toHaveLength(1);
      const next = await trainerOp(after, 'optim_step', { model_id: step.modelId, adam_params: ADAM });
      expect(next.result.metrics['optim/step']).toBe(2);
      expect(next.result.metrics.grad_norm).toBeGreaterThan(0);
    } finally {
      await after.close();
    }
  });
});

describe('sim trainer whose disk write fails once', () => {
  it('answers the failure, then runs the op again when it is retried under the same idempotency key', async () => {
    const store = await SimClusterStore.open(tempDataDir());
    const write = store.writeTrainingModel.bind(store);
    let failures = 1;
    store.writeTrainingModel = async (record) => {
      if (failures-- > 0) throw new Error('ENOSPC: no space left on device');
      return write(record);
    };
    const trainer = await SimTrainerServer.open({ world, store, logger: silent, opDelayMs: 0 });
    const call = (op: string, body: unknown) =>
      trainer.handle({ method: 'POST', path: `/api/v1/${op}`, headers: { 'idempotency-key': 'create-1' }, body });
    const result = async (requestId: string) => {
      for (;;) {
        const reply = await trainer.handle({ method: 'POST', path: '/api/v1/retrieve_future', headers: {}, body: { request_id: requestId } });
        if (reply.status !== 408) return reply.json as Record<string, unknown>;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };

    const first = (await call('create_model', { base_model: BASE })).json as { request_id: string };
    expect(await result(first.request_id)).toMatchObject({ category: 'server', error: expect.stringContaining('ENOSPC') });
    const retried = (await call('create_model', { base_model: BASE })).json as { request_id: string; model_id: string };
    expect(retried.request_id).not.toBe(first.request_id);
    expect(await result(retried.request_id)).toEqual({ model_id: retried.model_id });
    // Once it succeeded, the key answers with that success.
    expect((await call('create_model', { base_model: BASE })).json).toEqual(retried);
  });
});
