/**
 * The SIMULATED cluster with its latency model on (sim-cluster/latency.ts):
 * answers wait the profile's time divided by the speedup, and /sim/latency
 * accounts it. A check of the wiring, not a benchmark: lower bounds are
 * firm (a timer never fires early), upper bounds loose (a busy machine is slow).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadSimWorld } from '../../core/envs/sim/world';
import { TinkerClient } from '../../core/trainer/tinker/client';
import type { WireDatum } from '../../core/trainer/tinker/wire';
import type { LatencyReport } from '../../sim-cluster/latency';
import { type SimCluster, startSimCluster } from '../../sim-cluster/server';

const world = loadSimWorld();
const silent = pino({ level: 'silent' });
const PROFILE = 'agent-rollout-heavy';
const SPEEDUP = 50;
/** Scheduling, HTTP and a loaded CI machine: slack above the modelled time, never below it. */
const SLACK_MS = 3000;

const tempDirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sim-latency-test-'));
  tempDirs.push(dir);
  return dir;
}
afterAll(() => tempDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

async function getJson<T>(cluster: SimCluster, route: string, method = 'GET'): Promise<T> {
  const response = await fetch(`${cluster.url}${route}`, { method });
  expect(response.status).toBe(200);
  return (await response.json()) as T;
}

interface Completion {
  usage: { prompt_tokens: number; completion_tokens: number };
  prompt_token_ids: number[];
  choices: Array<{ token_ids: number[]; logprobs: { content: Array<{ logprob: number }> } }>;
}

async function chat(cluster: SimCluster): Promise<{ completion: Completion; ms: number }> {
  const started = performance.now();
  const response = await fetch(`${cluster.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: world.model.name,
      seed: 7,
      logprobs: true,
      return_token_ids: true,
      messages: [
        { role: 'system', content: 'You are a SIMULATED agent. Answer with one action per turn.' },
        { role: 'user', content: '[SIMULATED] Task lookup-1 kind lookup: find one value in a table' },
      ],
    }),
  });
  const completion = (await response.json()) as Completion;
  const ms = performance.now() - started;
  expect(response.status).toBe(200);
  return { completion, ms };
}

/** The sampled turn as a Datum with advantage 1 on its tokens. */
function datumOf(completion: Completion): WireDatum {
  const prompt = completion.prompt_token_ids;
  const generated = completion.choices[0].token_ids;
  const sampled = completion.choices[0].logprobs.content.map((c) => c.logprob);
  const tokens = [...prompt, ...generated];
  const targets = tokens.slice(1);
  return {
    model_input: { chunks: [{ type: 'encoded_text', tokens: tokens.slice(0, -1) }] },
    loss_fn_inputs: {
      target_tokens: { data: targets, dtype: 'int64' },
      logprobs: { data: targets.map((_, j) => (j + 1 >= prompt.length ? sampled[j + 1 - prompt.length] : 0)), dtype: 'float32' },
      advantages: { data: targets.map((_, j) => (j + 1 >= prompt.length ? 1 : 0)), dtype: 'float32' },
    },
  };
}

describe(`sim cluster with the latency model ('${PROFILE}' at speedup ${SPEEDUP})`, () => {
  let cluster: SimCluster;
  beforeAll(async () => {
    cluster = await startSimCluster({ world, dataDir: tempDir(), logger: silent, latency: { profile: PROFILE, speedup: SPEEDUP } });
  });
  afterAll(() => cluster.close());

  it('answers a chat completion after its modelled time / speedup, and accounts it under /sim/latency', async () => {
    await getJson(cluster, '/sim/latency/reset', 'POST');
    const { completion, ms } = await chat(cluster);
    const latency = cluster.latency!;
    const simulated = latency.completionSeconds(completion.usage.prompt_tokens, completion.usage.completion_tokens, 1);
    const expectedMs = (simulated * 1000) / SPEEDUP;
    expect(expectedMs).toBeGreaterThan(50); // large enough to tell from an instant answer
    expect(ms).toBeGreaterThanOrEqual(expectedMs - 1);
    expect(ms).toBeLessThan(expectedMs + SLACK_MS);

    const report = await getJson<LatencyReport>(cluster, '/sim/latency');
    expect(report).toMatchObject({
      simulated: true,
      enabled: true,
      profile: PROFILE,
      speedup: SPEEDUP,
      inference: {
        requests: 1,
        promptTokens: completion.usage.prompt_tokens,
        completionTokens: completion.usage.completion_tokens,
        servers: latency.profile.inference.servers,
      },
      trainer: { busySeconds: 0, ops: 0, tokens: 0 },
    });
    // One replica was busy for the request, the others idle: the average over replicas.
    const busy = report.inference.busySeconds * report.inference.servers;
    expect(busy).toBeGreaterThanOrEqual(simulated * 0.99);
    expect(busy).toBeLessThan(simulated + (SLACK_MS / 1000) * SPEEDUP);
    expect(report.simulatedSeconds).toBeGreaterThanOrEqual(busy - 1e-6);
  });

  it('takes the modelled time for forward_backward and optim_step, one at a time, and accounts trainer busy time and tokens', async () => {
    const { completion } = await chat(cluster);
    const datum = datumOf(completion);
    const tokens = datum.model_input.chunks[0].tokens.length;
    const client = new TinkerClient({ baseUrl: cluster.url, apiKey: 'sim', pollSeconds: 0.01 });
    const modelId = await client.createModel({
      sessionId: await client.createSession([], {}),
      modelSeqId: 0,
      baseModel: world.model.name,
      lora: { rank: 8, train_attn: true, train_mlp: true, train_unembed: false },
    });
    await getJson(cluster, '/sim/latency/reset', 'POST');
    const latency = cluster.latency!;
    const simulated = latency.trainerOpSeconds('forward_backward', tokens)! + latency.trainerOpSeconds('optim_step')!;
    const started = performance.now();
    await client.forwardBackward({ modelId, seqId: 1, lossFn: 'importance_sampling', data: [datum] });
    await client.optimStep({
      modelId,
      seqId: 2,
      adam: { learning_rate: 0.1, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0, grad_clip_norm: 0 },
    });
    const ms = performance.now() - started;
    expect(ms).toBeGreaterThanOrEqual((simulated * 1000) / SPEEDUP - 1);

    const report = await getJson<LatencyReport>(cluster, '/sim/latency');
    expect(report.trainer.ops).toBe(2);
    expect(report.trainer.tokens).toBe(tokens);
    expect(report.trainer.busySeconds).toBeGreaterThanOrEqual(simulated * 0.99);
    expect(report.trainer.busySeconds).toBeLessThan(simulated + (SLACK_MS / 1000) * SPEEDUP);
    expect(report.inference.requests).toBe(0);
  });
});

describe('sim cluster without the latency model (the default)', () => {
  it('says so under /sim/latency, and its reset is harmless', async () => {
    const cluster = await startSimCluster({ world, dataDir: tempDir(), logger: silent });
    try {
      expect(cluster.latency).toBeUndefined();
      expect(await getJson(cluster, '/sim/latency')).toEqual({ simulated: true, enabled: false });
      expect(await getJson(cluster, '/sim/latency/reset', 'POST')).toEqual({ simulated: true, enabled: false });
      expect((await fetch(`${cluster.url}/sim/latency`, { method: 'DELETE' })).status).toBe(405);
    } finally {
      await cluster.close();
    }
  });

  it('refuses an unknown profile before it starts, naming the known ones', async () => {
    await expect(startSimCluster({ world, dataDir: tempDir(), logger: silent, latency: { profile: 'nope' } })).rejects.toThrow(
      /unknown latency profile 'nope'; known profiles .*balanced/,
    );
  });
});
