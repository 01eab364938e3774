/**
 * The SIMULATED cluster, in-process on a free port, spoken to through the
 * real `openai` client (vLLM subset), the project's Tinker client (the same
 * protocol it uses against SkyRL and hosted Tinker) and plain fetch for the
 * protocol's edges.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { BadRequestError, NotFoundError } from 'openai';
import type { ChatCompletion, ChatCompletionCreateParamsNonStreaming, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import pino from 'pino';
import { SIM_PROPOSER_MODEL } from '../../core/envs/sim/proposer';
import { baseHarness, loadSimWorld, SimHarness } from '../../core/envs/sim/world';
import { resolveSamplerWeights } from '../../core/trainer/sampler-weights';
import { TinkerClient, TrainerError, TrainerModelGoneError } from '../../core/trainer/tinker/client';
import {
  type AdamParams,
  decodeForwardBackwardResult,
  encodeForwardBackwardRequest,
  PROTOBUF_CONTENT_TYPE,
  type WireDatum,
} from '../../core/trainer/tinker/wire';
import { type SimCluster, startSimCluster } from '../../sim-cluster/server';
import { SimClusterStore } from '../../sim-cluster/checkpoints';
import { SimTrainerServer } from '../../sim-cluster/trainer-server';

const world = loadSimWorld();
const BASE = world.model.name;
const silent = pino({ level: 'silent' });

type VllmCompletion = ChatCompletion & {
  prompt_token_ids?: number[];
  choices: Array<ChatCompletion.Choice & { token_ids?: number[] }>;
};

const taskMessages: ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You are a SIMULATED agent. Answer with one action per turn.' },
  { role: 'user', content: '[SIMULATED] Task lookup-1 kind lookup: find one value in a table' },
];

const ADAM: AdamParams = { learning_rate: 0.1, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0, grad_clip_norm: 0 };

const tempDirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sim-cluster-test-'));
  tempDirs.push(dir);
  return dir;
}
afterAll(() => tempDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function openai(cluster: SimCluster): OpenAI {
  return new OpenAI({ baseURL: `${cluster.url}/v1`, apiKey: 'sim', maxRetries: 0 });
}

function tinker(cluster: SimCluster): TinkerClient {
  return new TinkerClient({ baseUrl: cluster.url, apiKey: 'sim', pollSeconds: 0.01 });
}

async function complete(cluster: SimCluster, model: string, messages: ChatCompletionMessageParam[], seed = 3): Promise<VllmCompletion> {
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
  const entry = completion.choices[0].logprobs!.content![1].top_logprobs.find((alt) => alt.token === behaviour);
  if (!entry) throw new Error(`'${behaviour}' is not among the behaviour slot's alternatives`);
  return entry.logprob;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

async function post(cluster: SimCluster, route: string, body: unknown, contentType = 'application/json') {
  const response = await fetch(`${cluster.url}${route}`, {
    method: 'POST',
    headers: { 'content-type': contentType },
    body: body instanceof Uint8Array || typeof body === 'string' ? body : JSON.stringify(body),
  });
  const type = response.headers.get('content-type') ?? '';
  const bytes = Buffer.from(await response.arrayBuffer());
  const json: Json = type.startsWith('application/json') ? JSON.parse(bytes.toString('utf8')) : undefined;
  return { status: response.status, json, text: bytes.toString('utf8'), bytes, contentType: type };
}

/**
 * A Datum for one sampled turn (model_input = tokens[:-1], targets =
 * tokens[1:]), with advantage +1 on the behaviour token only.
 */
function behaviourDatum(completion: VllmCompletion): WireDatum {
  const prompt = completion.prompt_token_ids!;
  const generated = completion.choices[0].token_ids!;
  const sampled = completion.choices[0].logprobs!.content!.map((entry) => entry.logprob);
  const tokens = [...prompt, ...generated];
  const logprobs = tokens.slice(1).map((_, j) => (j + 1 >= prompt.length ? sampled[j + 1 - prompt.length] : 0));
  const advantages = tokens.slice(1).map((_, j) => (j + 1 === prompt.length + 1 ? 1 : 0));
  return {
    model_input: { chunks: [{ type: 'encoded_text', tokens: tokens.slice(0, -1) }] },
    loss_fn_inputs: {
      target_tokens: { data: tokens.slice(1), dtype: 'int64' },
      logprobs: { data: logprobs, dtype: 'float32' },
      advantages: { data: advantages, dtype: 'float32' },
    },
  };
}

async function createModel(cluster: SimCluster, rank = 8): Promise<string> {
  const client = tinker(cluster);
  return client.createModel({
    sessionId: await client.createSession([], {}),
    modelSeqId: 0,
    baseModel: BASE,
    lora: { rank, train_attn: true, train_mlp: true, train_unembed: false },
  });
}

async function loadAdapter(cluster: SimCluster, name: string, samplerPath: string) {
  const dir = await resolveSamplerWeights({ samplerPath, trainer: tinker(cluster), adapterDir: tempDir() });
  return post(cluster, '/v1/load_lora_adapter', { lora_name: name, lora_path: dir });
}

/** create_model -> forward_backward -> optim_step -> save_weights_for_sampler -> unpacked -> load_lora_adapter. */
async function trainOneStep(cluster: SimCluster, adapterName: string) {
  const client = tinker(cluster);
  const sampled = await complete(cluster, BASE, taskMessages);
  const behaviour = sampled.choices[0].message.content!.split(' ')[1];
  const modelId = await createModel(cluster);
  const fb = await client.forwardBackward({ modelId, seqId: 1, lossFn: 'importance_sampling', data: [behaviourDatum(sampled)] });
  const optim = await client.optimStep({ modelId, seqId: 2, adam: ADAM });
  const samplerPath = await client.saveWeightsForSampler({ modelId, seqId: 3, name: 'step-1' });
  const load = await loadAdapter(cluster, adapterName, samplerPath);
  expect(load).toMatchObject({ status: 200, text: `Success: LoRA adapter '${adapterName}' added successfully.` });
  return { sampled, behaviour, modelId, fb, optim, samplerPath };
}

describe('sim cluster: inference (vLLM subset)', () => {
  let cluster: SimCluster;
  beforeAll(async () => {
    cluster = await startSimCluster({ world, dataDir: tempDir(), port: 0, logger: silent });
  });
  afterAll(() => cluster.close());

  it('answers the openai client with logprobs, token ids and prompt token ids, each turn extending the last', async () => {
    const turn1 = await complete(cluster, BASE, taskMessages);
    const choice = turn1.choices[0];
    expect(choice.message.content).toMatch(/^(Action|Maybe): \w+$/);
    expect(choice.finish_reason).toBe('stop');
    expect(choice.token_ids).toHaveLength(3);
    expect(
      choice
        .logprobs!.content!.map((entry) => entry.token)
        .slice(0, 2)
        .join(' '),
    ).toBe(choice.message.content);
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

  it('answers prompt_logprobs of a token-id prompt on /v1/completions, as vLLM does, matching the chat log-probs', async () => {
    const sampled = await complete(cluster, BASE, taskMessages);
    const tokens = [...sampled.prompt_token_ids!, ...sampled.choices[0].token_ids!];
    const reply = await post(cluster, '/v1/completions', {
      model: BASE,
      prompt: tokens,
      max_tokens: 1,
      temperature: 0,
      prompt_logprobs: 0,
    });
    expect(reply.status).toBe(200);
    const perPosition = reply.json.choices[0].prompt_logprobs as Array<Record<string, { logprob: number }> | null>;
    expect(perPosition[0]).toBeNull();
    const generated = sampled.choices[0].logprobs!.content!.map((e) => e.logprob);
    const start = sampled.prompt_token_ids!.length;
    generated.forEach((lp, j) => expect(perPosition[start + j]![String(tokens[start + j])].logprob).toBeCloseTo(lp, 12));
  });

  it('makes the openai client throw NotFoundError (404) for a model that is neither the base nor a loaded adapter', async () => {
    const request = openai(cluster).chat.completions.create({ model: 'no-such-model', messages: taskMessages });
    await expect(request).rejects.toBeInstanceOf(NotFoundError);
    await expect(request).rejects.toMatchObject({ status: 404, message: expect.stringContaining('no-such-model') });
  });

  it('answers a proposal request under model sim-proposer with a harness spec in its last json block, listed under /v1/models', async () => {
    const request = {
      env: 'sim',
      direction: 'environment_contract',
      round: 1,
      slot: 1,
      parent: baseHarness(world),
      envFacts: { behaviours: world.behaviours, finish: 'finish' },
      failures: [
        {
          taskId: 'api_call-001',
          kind: 'api_call',
          failureType: 'wrong_answer',
          turns: [{ role: 'assistant', content: 'Action: finish' }],
        },
      ],
      parentResults: null,
    };
    const completion = await openai(cluster).chat.completions.create({
      model: SIM_PROPOSER_MODEL,
      messages: [
        { role: 'system', content: 'You propose harness changes.' },
        { role: 'user', content: `The request:\n\n\`\`\`json proposal-request\n${JSON.stringify(request, null, 2)}\n\`\`\`` },
      ],
    });
    expect(completion).toMatchObject({
      object: 'chat.completion',
      model: SIM_PROPOSER_MODEL,
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant' } }],
    });
    expect(completion.usage!.completion_tokens).toBeGreaterThan(0);
    const blocks = [...completion.choices[0].message.content!.matchAll(/```json\n([\s\S]*?)\n```/g)];
    const spec = SimHarness.parse(JSON.parse(blocks.at(-1)![1]).spec);
    expect(spec).toMatchObject({ parent: 'base', direction: 'environment_contract', hints: [world.behaviours[0]] });
    expect(spec.description).toContain('SIMULATED proposer');

    const proposer = (await openai(cluster).models.list()).data.find((m) => m.id === SIM_PROPOSER_MODEL);
    expect(proposer).toMatchObject({ object: 'model', owned_by: 'sim' });
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
  });
});

describe('sim cluster: trainer (Tinker API of SDK >= 0.25)', () => {
  let cluster: SimCluster;
  beforeAll(async () => {
    cluster = await startSimCluster({ world, dataDir: tempDir(), port: 0, logger: silent });
  });
  afterAll(() => cluster.close());

  it('raises the trained behaviour under the new adapter after one positive-advantage training step', async () => {
    const { sampled, behaviour, fb, optim } = await trainOneStep(cluster, 'run-a-step-1');
    expect(fb.metrics['loss:sum']).toBeCloseTo(-1, 6); // on-policy: ratio 1, advantage 1
    expect(optim['optim/step']).toBe(1);
    expect(optim.grad_norm).toBeGreaterThan(0);
    const trained = await complete(cluster, 'run-a-step-1', taskMessages);
    expect(behaviourLogprob(trained, behaviour)).toBeGreaterThan(behaviourLogprob(sampled, behaviour));
    expect(behaviourLogprob(await complete(cluster, BASE, taskMessages), behaviour)).toBeCloseTo(behaviourLogprob(sampled, behaviour), 12);
  });

  it('lists the base model and every loaded adapter under /v1/models', async () => {
    await trainOneStep(cluster, 'listed-step-1');
    const byId = new Map((await openai(cluster).models.list()).data.map((m) => [m.id, m as unknown as Record<string, unknown>]));
    expect(byId.get(BASE)).toMatchObject({ object: 'model', owned_by: 'sim' });
    expect(byId.get('listed-step-1')).toMatchObject({ parent: BASE });
  });

  it('refuses create_model without a session (422 naming session_id) and with an unknown one (404)', async () => {
    const missing = await post(cluster, '/api/v1/create_model', { base_model: BASE, lora_config: { rank: 8 } });
    expect(missing.status).toBe(422);
    expect(missing.json.detail).toEqual(expect.arrayContaining([expect.objectContaining({ loc: ['body', 'session_id'] })]));
    const unknown = await post(cluster, '/api/v1/create_model', { session_id: 'session_gone', base_model: BASE, lora_config: { rank: 8 } });
    expect(unknown).toMatchObject({ status: 404, json: { detail: 'Session not found' } });
  });

  it('fails create_model with a rank above its maximum, naming the rank', async () => {
    await expect(createModel(cluster, 512)).rejects.toThrow(/LoRA rank 512 exceeds the maximum/);
  });

  it('takes forward_backward bodies as protobuf only (415 for JSON), and answers protobuf', async () => {
    const modelId = await createModel(cluster);
    const json = await post(cluster, '/api/v1/forward_backward', {
      model_id: modelId,
      forward_backward_input: { data: [], loss_fn: 'importance_sampling' },
    });
    expect(json.status).toBe(415);
    expect(json.json.detail).toContain('application/x-protobuf');
    const datum = behaviourDatum(await complete(cluster, BASE, taskMessages));
    const body = encodeForwardBackwardRequest({
      model_id: modelId,
      seq_id: 1,
      data: [datum],
      loss_fn: 'importance_sampling',
      loss_fn_config: null,
      forward_only: false,
    });
    const submitted = await post(cluster, '/api/v1/forward_backward', body, PROTOBUF_CONTENT_TYPE);
    expect(submitted.status).toBe(200);
    let reply;
    do reply = await post(cluster, '/api/v1/retrieve_future', { request_id: submitted.json.request_id });
    while (reply.status === 408);
    expect(reply.contentType).toBe(PROTOBUF_CONTENT_TYPE);
    expect(decodeForwardBackwardResult(reply.bytes).loss_fn_outputs).toHaveLength(1);
  });

  it('reports the new policy log-prob of each model token from forward_backward, and the same from a forward pass', async () => {
    const client = tinker(cluster);
    const sampled = await complete(cluster, BASE, taskMessages);
    const modelId = await createModel(cluster);
    const fb = await client.forwardBackward({ modelId, seqId: 1, lossFn: 'importance_sampling', data: [behaviourDatum(sampled)] });
    const logprobs = fb.loss_fn_outputs[0].logprobs.data;
    const promptLength = sampled.prompt_token_ids!.length;
    const sampledLogprobs = sampled.choices[0].logprobs!.content!.map((entry) => entry.logprob);
    expect(logprobs.slice(promptLength - 1)).toEqual(sampledLogprobs.map((lp) => expect.closeTo(lp, 6)));
    expect(logprobs.slice(0, promptLength - 1).every((lp) => lp === 0)).toBe(true);
    const forward = await client.forwardBackward({
      modelId,
      seqId: 2,
      lossFn: 'cross_entropy',
      forwardOnly: true,
      data: [behaviourDatum(sampled)],
    });
    expect(forward.loss_fn_outputs[0].logprobs.data).toEqual(logprobs);
  });

  it('applies a forward_backward sent twice under one seq_id once, and refuses another body under that seq_id (409)', async () => {
    const client = tinker(cluster);
    const sampled = await complete(cluster, BASE, taskMessages);
    const data = [behaviourDatum(sampled)];

    const once = await createModel(cluster);
    await client.forwardBackward({ modelId: once, seqId: 1, lossFn: 'importance_sampling', data });
    const onceStep = await client.optimStep({ modelId: once, seqId: 2, adam: ADAM });

    const twice = await createModel(cluster);
    const body = encodeForwardBackwardRequest({
      model_id: twice,
      seq_id: 1,
      data,
      loss_fn: 'importance_sampling',
      loss_fn_config: null,
      forward_only: false,
    });
    const first = await post(cluster, '/api/v1/forward_backward', body, PROTOBUF_CONTENT_TYPE);
    const repeat = await post(cluster, '/api/v1/forward_backward', body, PROTOBUF_CONTENT_TYPE);
    expect(repeat.json.request_id).toBe(first.json.request_id);
    await client.forwardBackward({ modelId: twice, seqId: 1, lossFn: 'importance_sampling', data });
    const twiceStep = await client.optimStep({ modelId: twice, seqId: 2, adam: ADAM });
    expect(twiceStep.grad_norm).toBeGreaterThan(0);
    expect(twiceStep.grad_norm).toBeCloseTo(onceStep.grad_norm, 12);

    const other = encodeForwardBackwardRequest({
      model_id: twice,
      seq_id: 1,
      data: [],
      loss_fn: 'importance_sampling',
      loss_fn_config: null,
      forward_only: false,
    });
    expect(await post(cluster, '/api/v1/forward_backward', other, PROTOBUF_CONTENT_TYPE)).toMatchObject({
      status: 409,
      json: { detail: 'Training request sequence number was reused' },
    });
    await expect(client.optimStep({ modelId: twice, seqId: 1, adam: ADAM })).rejects.toThrow(/HTTP 409/);
  });

  it('steps once for an optim_step sent twice under one seq_id', async () => {
    const client = tinker(cluster);
    const modelId = await createModel(cluster);
    await client.optimStep({ modelId, seqId: 1, adam: ADAM });
    await client.optimStep({ modelId, seqId: 1, adam: ADAM });
    expect((await post(cluster, '/api/v1/get_info', { model_id: modelId })).json).toMatchObject({
      model_id: modelId,
      model_data: { model_name: BASE },
      optim_steps: 1,
    });
  });

  it('answers 409 for a sampler checkpoint name that exists; the client takes it as saved and finds its path', async () => {
    const client = tinker(cluster);
    const { modelId, samplerPath } = await trainOneStep(cluster, 'keep-first-step-1');
    const again = await post(cluster, '/api/v1/save_weights_for_sampler', { model_id: modelId, path: 'step-1' });
    expect(again).toMatchObject({ status: 409, json: { detail: `Checkpoint 'step-1' already exists for model '${modelId}'` } });
    const found = await client.saveWeightsForSampler({ modelId, seqId: 9, name: 'step-1' });
    expect(found).toBe(`tinker://${modelId}/sampler_weights/step-1`);
    expect(samplerPath).toBe(`tinker://${modelId}/step-1`);
    expect(await client.listCheckpoints(modelId)).toEqual([
      expect.objectContaining({ checkpoint_id: 'step-1', checkpoint_type: 'sampler' }),
    ]);
  });

  it('serves a checkpoint archive as a 302 to its download, a tar.gz of a LoRA adapter directory', async () => {
    const { modelId } = await trainOneStep(cluster, 'archive-step-1');
    const archive = await fetch(`${cluster.url}/api/v1/training_runs/${modelId}/checkpoints/step-1/archive`, { redirect: 'manual' });
    expect(archive.status).toBe(302);
    const download = await fetch(archive.headers.get('location')!);
    expect(download.status).toBe(200);
    const bytes = Buffer.from(await download.arrayBuffer());
    expect(bytes.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b])); // gzip
    expect((await fetch(`${cluster.url}/api/v1/training_runs/${modelId}/checkpoints/step-9/archive`, { redirect: 'manual' })).status).toBe(
      404,
    );
  });

  it('refuses to load an adapter name twice unless in place, and a lora_path that is no adapter directory, as vLLM does', async () => {
    const { samplerPath } = await trainOneStep(cluster, 'twice-step-1');
    const again = await loadAdapter(cluster, 'twice-step-1', samplerPath);
    expect(again).toMatchObject({
      status: 400,
      json: { error: { type: 'InvalidUserInput', message: expect.stringContaining('has already been loaded') } },
    });
    const dir = await resolveSamplerWeights({ samplerPath, trainer: tinker(cluster), adapterDir: tempDir() });
    expect((await post(cluster, '/v1/load_lora_adapter', { lora_name: 'twice-step-1', lora_path: dir, load_inplace: true })).status).toBe(
      200,
    );
    const unknown = await post(cluster, '/v1/load_lora_adapter', { lora_name: 'ghost', lora_path: samplerPath });
    expect(unknown).toMatchObject({
      status: 404,
      json: { error: { type: 'NotFoundError', message: `Loading lora ghost failed: No adapter found for ${samplerPath}` } },
    });
  });

  it('unloads an adapter, after which it is an unknown model', async () => {
    await trainOneStep(cluster, 'unload-step-1');
    const unload = await post(cluster, '/v1/unload_lora_adapter', { lora_name: 'unload-step-1' });
    expect(unload).toMatchObject({ status: 200, text: "Success: LoRA adapter 'unload-step-1' removed successfully." });
    await expect(complete(cluster, 'unload-step-1', taskMessages)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('answers a future of an unknown request_id with 404', async () => {
    expect((await post(cluster, '/api/v1/retrieve_future', { request_id: '424242' })).status).toBe(404);
  });

  it('fails a forward_backward whose advantage sits on a token the policy cannot produce with HTTP 400, naming datum and position', async () => {
    const datum = behaviourDatum(await complete(cluster, BASE, taskMessages));
    datum.loss_fn_inputs.advantages.data[0] = 1; // target 1 is a prompt token
    const modelId = await createModel(cluster);
    await expect(
      tinker(cluster).forwardBackward({ modelId, seqId: 1, lossFn: 'importance_sampling', data: [datum] }),
    ).rejects.toMatchObject({
      category: 'user',
      message: expect.stringContaining('datum 0, position 0'),
    });
  });

  describe('rejects bad bodies with HTTP 422 naming the field (FastAPI shape)', () => {
    it('a body that is not JSON', async () => {
      const response = await post(cluster, '/api/v1/create_model', '{not json');
      expect(response.status).toBe(400);
      expect(response.json.detail).toContain('not valid JSON');
    });

    it('create_model for another base model', async () => {
      const client = tinker(cluster);
      const response = await post(cluster, '/api/v1/create_model', {
        session_id: await client.createSession([], {}),
        base_model: 'Qwen/Qwen3-8B',
        lora_config: { rank: 8 },
      });
      expect(response.status).toBe(400);
      expect(response.json.detail).toContain('base_model');
    });

    it('forward_backward whose advantages do not match the input length', async () => {
      const datum = behaviourDatum(await complete(cluster, BASE, taskMessages));
      datum.loss_fn_inputs.advantages.data.pop();
      const modelId = await createModel(cluster);
      const body = encodeForwardBackwardRequest({
        model_id: modelId,
        seq_id: 1,
        data: [datum],
        loss_fn: 'importance_sampling',
        loss_fn_config: null,
        forward_only: false,
      });
      const response = await post(cluster, '/api/v1/forward_backward', body, PROTOBUF_CONTENT_TYPE);
      expect(response.status).toBe(422);
      expect(response.json.detail[0].loc).toEqual(['body', 'forward_backward_input', 'data', 0, 'loss_fn_inputs', 'advantages']);
    });

    it('forward_backward whose body is not protobuf', async () => {
      const response = await post(cluster, '/api/v1/forward_backward', Buffer.from('definitely not protobuf'), PROTOBUF_CONTENT_TYPE);
      expect(response.status).toBe(422);
      expect(response.json.detail).toContain('Invalid proto forward_backward body');
    });

    it('forward_backward with an unsupported loss', async () => {
      const modelId = await createModel(cluster);
      const body = encodeForwardBackwardRequest({
        model_id: modelId,
        seq_id: 1,
        data: [],
        loss_fn: 'ppo',
        loss_fn_config: null,
        forward_only: false,
      });
      const response = await post(cluster, '/api/v1/forward_backward', body, PROTOBUF_CONTENT_TYPE);
      expect(response.status).toBe(422);
      expect(response.json.detail[0].msg).toContain("loss_fn 'ppo' is not supported");
    });

    it('optim_step with a negative learning rate', async () => {
      const modelId = await createModel(cluster);
      const response = await post(cluster, '/api/v1/optim_step', { model_id: modelId, adam_params: { learning_rate: -1 } });
      expect(response.status).toBe(422);
      expect(response.json.detail[0].loc).toEqual(['body', 'adam_params', 'learning_rate']);
    });
  });
});

describe('sim trainer sessions', () => {
  it('unloads the models of a session that stops sending heartbeats; a kept-alive one goes on training', async () => {
    const cluster = await startSimCluster({ world, dataDir: tempDir(), logger: silent, trainerSessionTimeoutMs: 300 });
    try {
      const client = tinker(cluster);
      const silentSession = await client.createSession([], {});
      const liveSession = await client.createSession([], {});
      const lora = { rank: 8, train_attn: true, train_mlp: true, train_unembed: false };
      const abandoned = await client.createModel({ sessionId: silentSession, modelSeqId: 0, baseModel: BASE, lora });
      const kept = await client.createModel({ sessionId: liveSession, modelSeqId: 0, baseModel: BASE, lora });
      for (let i = 0; i < 8; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(await client.heartbeatSession(liveSession)).toBe('alive');
      }
      expect(await client.heartbeatSession('session_unknown')).toBe('expired');
      await expect(client.optimStep({ modelId: abandoned, seqId: 1, adam: ADAM })).rejects.toThrow(/is not loaded \(its session expired/);
      expect(await client.optimStep({ modelId: kept, seqId: 1, adam: ADAM })).toMatchObject({ 'optim/step': 1 });
    } finally {
      await cluster.close();
    }
  });
});

describe('sim cluster with slow training ops', () => {
  it('holds retrieve_future for a pending op, then answers 408; the client polls until the result', async () => {
    const cluster = await startSimCluster({ world, dataDir: tempDir(), logger: silent, trainerOpDelayMs: 400, trainerLongPollMs: 100 });
    try {
      const client = tinker(cluster);
      const submitted = await post(cluster, '/api/v1/create_model', {
        session_id: await client.createSession([], {}),
        base_model: BASE,
        lora_config: { rank: 8 },
      });
      const started = Date.now();
      const early = await post(cluster, '/api/v1/retrieve_future', { request_id: submitted.json.request_id });
      expect(early).toMatchObject({ status: 408, json: { detail: 'Timeout waiting for result' } });
      expect(Date.now() - started).toBeGreaterThanOrEqual(90);
      expect(await client.optimStep({ modelId: submitted.json.model_id, seqId: 1, adam: ADAM })).toMatchObject({ 'optim/step': 1 });
    } finally {
      await cluster.close();
    }
  });
});

describe('sim cluster restarted on the same data directory', () => {
  it('forgets the loaded adapter as vLLM does (404 until it is loaded again), continues the training model, and answers a seq_id sent before the restart with its first future', async () => {
    const dataDir = tempDir();
    const before = await startSimCluster({ world, dataDir, logger: silent });
    let trainedLogprob: number;
    let step: Awaited<ReturnType<typeof trainOneStep>>;
    let fbBefore: string;
    const body = (modelId: string, data: WireDatum[]) =>
      encodeForwardBackwardRequest({
        model_id: modelId,
        seq_id: 4,
        data,
        loss_fn: 'importance_sampling',
        loss_fn_config: null,
        forward_only: false,
      });
    try {
      step = await trainOneStep(before, 'restart-step-1');
      trainedLogprob = behaviourLogprob(await complete(before, 'restart-step-1', taskMessages), step.behaviour);
      fbBefore = (await post(before, '/api/v1/forward_backward', body(step.modelId, [behaviourDatum(step.sampled)]), PROTOBUF_CONTENT_TYPE))
        .json.request_id;
    } finally {
      await before.close();
    }

    const after = await startSimCluster({ world, dataDir, logger: silent });
    try {
      const client = tinker(after);
      expect((await openai(after).models.list()).data.map((m) => m.id)).toEqual([BASE, SIM_PROPOSER_MODEL]);
      const refused = await complete(after, 'restart-step-1', taskMessages).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(NotFoundError);
      expect((refused as Error).message).toContain('The model `restart-step-1` does not exist.');
      // Loaded again from the trainer's sampler checkpoint, it serves the trained policy.
      expect(await loadAdapter(after, 'restart-step-1', step.samplerPath)).toMatchObject({ status: 200 });
      expect(behaviourLogprob(await complete(after, 'restart-step-1', taskMessages), step.behaviour)).toBe(trainedLogprob);
      expect((await post(after, '/api/v1/get_info', { model_id: step.modelId })).json.optim_steps).toBe(1);

      // The gradient accumulated before the restart is still there; its op sent again is not applied again.
      const again = await post(
        after,
        '/api/v1/forward_backward',
        body(step.modelId, [behaviourDatum(step.sampled)]),
        PROTOBUF_CONTENT_TYPE,
      );
      expect(again.json.request_id).toBe(fbBefore);
      const next = await client.optimStep({ modelId: step.modelId, seqId: 5, adam: ADAM });
      expect(next['optim/step']).toBe(2);
      expect(next.grad_norm).toBeGreaterThan(0);
    } finally {
      await after.close();
    }
  });
});

describe('sim cluster restarted with keepAdapters', () => {
  it('still serves the adapter loaded before the restart, with the same policy', async () => {
    const dataDir = tempDir();
    const before = await startSimCluster({ world, dataDir, logger: silent });
    let step: Awaited<ReturnType<typeof trainOneStep>>;
    let trainedLogprob: number;
    try {
      step = await trainOneStep(before, 'kept-step-1');
      trainedLogprob = behaviourLogprob(await complete(before, 'kept-step-1', taskMessages), step.behaviour);
    } finally {
      await before.close();
    }

    const after = await startSimCluster({ world, dataDir, logger: silent, keepAdapters: true });
    try {
      expect((await openai(after).models.list()).data.map((m) => m.id)).toContain('kept-step-1');
      expect(behaviourLogprob(await complete(after, 'kept-step-1', taskMessages), step.behaviour)).toBe(trainedLogprob);
    } finally {
      await after.close();
    }
  });

  it('does not bring back an adapter that an earlier restart without it forgot', async () => {
    const dataDir = tempDir();
    const first = await startSimCluster({ world, dataDir, logger: silent });
    try {
      await trainOneStep(first, 'forgotten-step-1');
    } finally {
      await first.close();
    }
    await (await startSimCluster({ world, dataDir, logger: silent })).close();

    const kept = await startSimCluster({ world, dataDir, logger: silent, keepAdapters: true });
    try {
      expect((await openai(kept).models.list()).data.map((m) => m.id)).not.toContain('forgotten-step-1');
    } finally {
      await kept.close();
    }
  });
});

describe('sim trainer whose disk write fails once', () => {
  it('answers the failure as a server fault and keeps answering its seq_id with it (as SkyRL); the op sent under a new seq_id runs', async () => {
    const store = await SimClusterStore.open(tempDir());
    const write = store.writeTrainingModel.bind(store);
    const trainer = await SimTrainerServer.open({ world, store, logger: silent, opDelayMs: 0 });
    const call = (op: string, body: unknown) =>
      trainer.handle({
        method: 'POST',
        path: `/api/v1/${op}`,
        headers: {},
        body,
        raw: Buffer.from(JSON.stringify(body)),
        contentType: 'application/json',
      });
    const result = async (requestId: string) => {
      for (;;) {
        const reply = await call('retrieve_future', { request_id: requestId });
        if (reply.status !== 408) return reply;
      }
    };
    const session = ((await call('create_session', { tags: [], sdk_version: '0.25.0' })).json as { session_id: string }).session_id;
    const created = (await call('create_model', { session_id: session, base_model: BASE, lora_config: { rank: 8 } })).json as {
      request_id: string;
      model_id: string;
    };
    expect((await result(created.request_id)).status).toBe(200);

    let failures = 1;
    store.writeTrainingModel = async (record) => {
      if (failures-- > 0) throw new Error('ENOSPC: no space left on device');
      return write(record);
    };
    const step = { model_id: created.model_id, adam_params: ADAM, seq_id: 1 };
    const first = (await call('optim_step', step)).json as { request_id: string };
    expect(await result(first.request_id)).toMatchObject({
      status: 200,
      json: { category: 'server', error: expect.stringContaining('ENOSPC') },
    });
    // The seq_id is spent: sent again, it answers with the same failed future, and nothing is applied.
    expect(((await call('optim_step', step)).json as { request_id: string }).request_id).toBe(first.request_id);
    const retried = (await call('optim_step', { ...step, seq_id: 2 })).json as { request_id: string };
    expect(retried.request_id).not.toBe(first.request_id);
    expect(await result(retried.request_id)).toMatchObject({ status: 200, json: { metrics: { 'optim/step': 1 } } });
    // Once it succeeded, its seq_id answers with that success.
    expect(((await call('optim_step', { ...step, seq_id: 2 })).json as { request_id: string }).request_id).toBe(retried.request_id);
    await trainer.drain();
  });
});

test('the Tinker client names an unreachable trainer in one message', async () => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  const client = new TinkerClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'x', pollSeconds: 0.001, connectionRetrySeconds: 0.001 });
  const error = await client.createSession([], {}).catch((err: unknown) => err);
  expect(error).toBeInstanceOf(TrainerError);
  expect((error as TrainerError).category).toBe('server');
  expect((error as Error).message).toBe(
    `trainer http://127.0.0.1:${port} is unreachable (create_session): ECONNREFUSED (connect ECONNREFUSED 127.0.0.1:${port})`,
  );
});

describe('sim trainer: training state (save_weights, load_weights, weights_info, DELETE), as SkyRL 0.4 answers them', () => {
  let cluster: SimCluster;
  let sampled: VllmCompletion;
  beforeAll(async () => {
    cluster = await startSimCluster({ world, dataDir: tempDir(), port: 0, logger: silent });
    sampled = await complete(cluster, BASE, taskMessages);
  });
  afterAll(() => cluster.close());

  const forward = async (modelId: string, seqId: number) =>
    (
      await tinker(cluster).forwardBackward({
        modelId,
        seqId,
        lossFn: 'importance_sampling',
        data: [behaviourDatum(sampled)],
        forwardOnly: true,
      })
    ).loss_fn_outputs[0].logprobs.data;

  /** A model trained one step, then saved as `name`; the next seq_id is 4. */
  async function trainedAndSaved(name: string) {
    const client = tinker(cluster);
    const modelId = await createModel(cluster);
    await client.forwardBackward({ modelId, seqId: 1, lossFn: 'importance_sampling', data: [behaviourDatum(sampled)] });
    await client.optimStep({ modelId, seqId: 2, adam: ADAM });
    const path = await client.saveWeights({ modelId, seqId: 3, name });
    return { modelId, path };
  }

  /** forward_backward + optim_step under seq_ids `seq`, `seq + 1`; the optim_step metrics and the log-probs after it. */
  async function stepAndForward(modelId: string, seq: number) {
    const client = tinker(cluster);
    await client.forwardBackward({ modelId, seqId: seq, lossFn: 'importance_sampling', data: [behaviourDatum(sampled)] });
    const metrics = await client.optimStep({ modelId, seqId: seq + 1, adam: ADAM });
    return { metrics, logprobs: await forward(modelId, seq + 2) };
  }

  it('restores a saved state into a fresh model: the same log-probs, and with the optimizer state the same next step; without it a different one', async () => {
    const client = tinker(cluster);
    const { modelId, path } = await trainedAndSaved('state-1');
    expect(path).toBe(`tinker://${modelId}/weights/state-1`);
    expect(await client.listCheckpoints(modelId)).toContainEqual(
      expect.objectContaining({ checkpoint_id: 'state-1', checkpoint_type: 'training', tinker_path: path }),
    );
    const savedLogprobs = await forward(modelId, 4);

    const withOptimizer = await createModel(cluster);
    await client.loadWeights({ modelId: withOptimizer, seqId: 1, path, optimizer: true });
    const withoutOptimizer = await createModel(cluster);
    await client.loadWeights({ modelId: withoutOptimizer, seqId: 1, path, optimizer: false });
    expect(await forward(withOptimizer, 2)).toEqual(savedLogprobs);
    expect(await forward(withoutOptimizer, 2)).toEqual(savedLogprobs);

    const original = await stepAndForward(modelId, 5);
    const restored = await stepAndForward(withOptimizer, 3);
    const fresh = await stepAndForward(withoutOptimizer, 3);
    expect(original.metrics['optim/step']).toBe(2);
    expect(restored.metrics).toEqual(original.metrics);
    expect(restored.logprobs).toEqual(original.logprobs);
    // Zero Adam moments and step 1: the same gradient moves the weights by another amount.
    expect(fresh.metrics['optim/step']).toBe(1);
    expect(fresh.logprobs).not.toEqual(original.logprobs);
  });

  it('answers a save of a name that exists with 409; the client takes a retried save as done and returns its path', async () => {
    const { modelId, path } = await trainedAndSaved('state-retried');
    expect(await post(cluster, '/api/v1/save_weights', { model_id: modelId, path: 'state-retried' })).toMatchObject({
      status: 409,
      json: { detail: `Checkpoint 'state-retried' already exists for model '${modelId}'` },
    });
    expect(await tinker(cluster).saveWeights({ modelId, seqId: 4, name: 'state-retried' })).toBe(path);
    expect(await tinker(cluster).saveWeights({ modelId, seqId: 3, name: 'state-retried' })).toBe(path);
  });

  it('refuses load_weights into a model that had another request (400, as SkyRL), and a path that is no training checkpoint', async () => {
    const client = tinker(cluster);
    const { modelId, path } = await trainedAndSaved('state-refused');
    const raw = await post(cluster, '/api/v1/load_weights', { model_id: modelId, path, optimizer: true, seq_id: 4 });
    expect(raw).toMatchObject({ status: 400, json: { detail: 'LoadWeights is not permitted with seq_id 4' } });
    const refused = await client.loadWeights({ modelId, seqId: 5, path, optimizer: true }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(TrainerError);
    expect(refused).not.toBeInstanceOf(TrainerModelGoneError);
    expect((refused as TrainerError).category).toBe('user');
    expect((refused as Error).message).toMatch(/HTTP 400: LoadWeights is not permitted with seq_id 5/);

    const fresh = await createModel(cluster);
    expect(await post(cluster, '/api/v1/load_weights', { model_id: fresh, path: `tinker://${modelId}/sampler_weights/x` })).toMatchObject({
      status: 400,
      json: { detail: 'request.path must be in format tinker://source_model_id/weights/checkpoint_id' },
    });
    expect(await post(cluster, '/api/v1/load_weights', { model_id: fresh, path: `tinker://${modelId}/weights/never-saved` })).toMatchObject(
      {
        status: 404,
        json: { detail: `Checkpoint not found: ${modelId}/never-saved` },
      },
    );
    // Neither refusal was a request on the model: it still takes a load.
    await client.loadWeights({ modelId: fresh, seqId: 1, path, optimizer: true });
  });

  it('answers weights_info with the base model and LoRA rank; a path of another kind is 400', async () => {
    const client = tinker(cluster);
    const modelId = await createModel(cluster, 4);
    const path = await client.saveWeights({ modelId, seqId: 1, name: 'state-rank-4' });
    expect(await client.weightsInfo(path)).toEqual({ baseModel: BASE, isLora: true, loraRank: 4 });
    expect(await post(cluster, '/api/v1/weights_info', { tinker_path: `tinker://${modelId}/sampler_weights/state-rank-4` })).toMatchObject({
      status: 400,
      json: { detail: 'Invalid tinker path format. Expected: tinker://model_id/weights/checkpoint_id' },
    });
    await expect(client.weightsInfo(`tinker://${modelId}/weights/never-saved`)).rejects.toThrow(/HTTP 404: Checkpoint not found/);
  });

  it('deletes a training checkpoint: it leaves the listing and a load of it is 404; a second delete finds it absent', async () => {
    const client = tinker(cluster);
    const { modelId, path } = await trainedAndSaved('state-deleted');
    expect(await client.deleteTrainingCheckpoint(modelId, 'state-deleted')).toBe('deleted');
    expect((await client.listCheckpoints(modelId)).map((c) => c.checkpoint_id)).not.toContain('state-deleted');
    const fresh = await createModel(cluster);
    expect(await post(cluster, '/api/v1/load_weights', { model_id: fresh, path })).toMatchObject({
      status: 404,
      json: { detail: `Checkpoint not found: ${modelId}/state-deleted` },
    });
    expect(await client.deleteTrainingCheckpoint(modelId, 'state-deleted')).toBe('absent');
    const bare = await fetch(`${cluster.url}/api/v1/training_runs/${modelId}/checkpoints/state-deleted`, { method: 'DELETE' });
    expect(bare.status).toBe(400);
  });

  it('tells a model unloaded with its expired session from other failures: TrainerModelGoneError naming the model', async () => {
    const expiring = await startSimCluster({ world, dataDir: tempDir(), logger: silent, trainerSessionTimeoutMs: 200 });
    try {
      const client = tinker(expiring);
      const modelId = await client.createModel({
        sessionId: await client.createSession([], {}),
        modelSeqId: 0,
        baseModel: BASE,
        lora: { rank: 8, train_attn: true, train_mlp: true, train_unembed: false },
      });
      await new Promise((resolve) => setTimeout(resolve, 600));
      const error = await client.saveWeights({ modelId, seqId: 1, name: 'too-late' }).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(TrainerModelGoneError);
      expect(error).toMatchObject({ modelId, category: 'user', opFailed: true });
      expect((error as Error).message).toContain(`the trainer no longer has model ${modelId}`);
    } finally {
      await expiring.close();
    }
  });
});

describe('sim cluster restarted with its live models deleted (the runbook)', () => {
  it('forgets the model (TrainerModelGoneError for training ops) but keeps its training checkpoints: listed, described by weights_info, loadable into a new model', async () => {
    const dataDir = tempDir();
    const before = await startSimCluster({ world, dataDir, logger: silent });
    let modelId: string;
    let statePath: string;
    let savedLogprobs: number[];
    let sampled: VllmCompletion;
    const datum = () => [behaviourDatum(sampled)];
    try {
      const client = tinker(before);
      sampled = await complete(before, BASE, taskMessages);
      modelId = await createModel(before, 16);
      await client.forwardBackward({ modelId, seqId: 1, lossFn: 'importance_sampling', data: datum() });
      await client.optimStep({ modelId, seqId: 2, adam: ADAM });
      statePath = await client.saveWeights({ modelId, seqId: 3, name: 'state-kept' });
      savedLogprobs = (await client.forwardBackward({ modelId, seqId: 4, lossFn: 'importance_sampling', data: datum(), forwardOnly: true }))
        .loss_fn_outputs[0].logprobs.data;
    } finally {
      await before.close();
    }
    rmSync(path.join(dataDir, 'trainer', 'models'), { recursive: true, force: true });

    const after = await startSimCluster({ world, dataDir, logger: silent });
    try {
      const client = tinker(after);
      for (const op of [
        () => client.forwardBackward({ modelId, seqId: 5, lossFn: 'importance_sampling', data: datum() }),
        () => client.forwardBackward({ modelId, seqId: 5, lossFn: 'importance_sampling', data: datum(), forwardOnly: true }),
        () => client.optimStep({ modelId, seqId: 5, adam: ADAM }),
        () => client.saveWeights({ modelId, seqId: 5, name: 'state-after' }),
        () => client.saveWeightsForSampler({ modelId, seqId: 5, name: 'step-after' }),
      ]) {
        const error = await op().catch((err: unknown) => err);
        expect(error).toBeInstanceOf(TrainerModelGoneError);
        expect(error).toMatchObject({ modelId, category: 'user', opFailed: true });
        expect((error as Error).message).toMatch(/HTTP 404: Model not found: the trainer no longer has model/);
      }
      expect(await client.listCheckpoints(modelId)).toEqual([
        expect.objectContaining({ checkpoint_type: 'training', tinker_path: statePath }),
      ]);
      expect(await client.weightsInfo(statePath)).toEqual({ baseModel: BASE, isLora: true, loraRank: 16 });
      const restored = await createModel(after, 16);
      await client.loadWeights({ modelId: restored, seqId: 1, path: statePath, optimizer: true });
      expect(
        (await client.forwardBackward({ modelId: restored, seqId: 2, lossFn: 'importance_sampling', data: datum(), forwardOnly: true }))
          .loss_fn_outputs[0].logprobs.data,
      ).toEqual(savedLogprobs);
      expect((await post(after, '/api/v1/get_info', { model_id: restored })).json.optim_steps).toBe(1);
    } finally {
      await after.close();
    }
  });
});
