/**
 * The SIMULATED cluster split into processes, as a multi-host test runs it:
 * one process serving only the trainer, others each standing for one vLLM
 * replica (`serve`, `--servers 1` with a latency profile), the requests each
 * answered (/sim/requests), and the process entry's flags
 * (sim-cluster/main.ts), run as a user runs it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import OpenAI, { NotFoundError } from 'openai';
import pino from 'pino';
import { loadSimWorld } from '../../core/envs/sim/world';
import { resolveSamplerWeights } from '../../core/trainer/sampler-weights';
import { TinkerClient } from '../../core/trainer/tinker/client';
import type { LatencyReport } from '../../sim-cluster/latency';
import type { SimRequestReport } from '../../sim-cluster/request-counts';
import { type SimCluster, startSimCluster } from '../../sim-cluster/server';

const ROOT = path.resolve(__dirname, '..', '..');
const world = loadSimWorld();
const BASE = world.model.name;
const silent = pino({ level: 'silent' });
const LORA = { rank: 8, train_attn: true, train_mlp: true, train_unembed: false };

const tempDirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sim-cluster-parts-'));
  tempDirs.push(dir);
  return dir;
}
afterAll(() => tempDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const messages = [
  { role: 'system' as const, content: 'You are a SIMULATED agent. Answer with one action per turn.' },
  { role: 'user' as const, content: '[SIMULATED] Task lookup-1 kind lookup: find one value in a table' },
];

function openai(url: string): OpenAI {
  return new OpenAI({ baseURL: `${url}/v1`, apiKey: 'sim', maxRetries: 0 });
}

function tinker(url: string): TinkerClient {
  return new TinkerClient({ baseUrl: url, apiKey: 'sim', pollSeconds: 0.01 });
}

async function getJson<T>(url: string, method = 'GET'): Promise<T> {
  const response = await fetch(url, { method });
  expect(response.status).toBe(200);
  return (await response.json()) as T;
}

function chat(url: string, model = BASE): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages, seed: 1 }),
  });
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A sampler checkpoint of a fresh model, unpacked as an adapter directory, and loaded under `name`. */
async function loadFreshAdapter(cluster: SimCluster, name: string): Promise<Response> {
  const client = tinker(cluster.url);
  const modelId = await client.createModel({ sessionId: await client.createSession([], {}), modelSeqId: 0, baseModel: BASE, lora: LORA });
  const samplerPath = await client.saveWeightsForSampler({ modelId, seqId: 1, name: 'v1' });
  const dir = await resolveSamplerWeights({ samplerPath, trainer: client, adapterDir: tempDir() });
  return fetch(`${cluster.url}/v1/load_lora_adapter`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ lora_name: name, lora_path: dir }),
  });
}

describe('a sim cluster serving only the trainer', () => {
  let cluster: SimCluster;
  beforeAll(async () => {
    cluster = await startSimCluster({ world, dataDir: tempDir(), logger: silent, serve: 'trainer' });
  });
  afterAll(() => cluster.close());

  it('refuses the inference API with a vLLM-shaped 404 saying it serves only training', async () => {
    const refused = await openai(cluster.url)
      .chat.completions.create({ model: BASE, messages })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(NotFoundError);
    expect((refused as Error).message).toContain('this sim cluster process serves only training');
    const health = await fetch(`${cluster.url}/health`);
    expect(health.status).toBe(404);
    expect(await health.json()).toEqual({
      error: {
        message: expect.stringContaining('the inference API (/v1, /health) is not served here'),
        type: 'NotFoundError',
        param: null,
        code: 404,
      },
    });
  });

  it('trains: a session and a model are created and an optimizer step runs', async () => {
    const client = tinker(cluster.url);
    const modelId = await client.createModel({ sessionId: await client.createSession([], {}), modelSeqId: 0, baseModel: BASE, lora: LORA });
    const adam = { learning_rate: 0.1, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0, grad_clip_norm: 0 };
    expect(await client.optimStep({ modelId, seqId: 1, adam })).toMatchObject({ 'optim/step': 1 });
  });
});

describe('a sim cluster serving only inference', () => {
  let cluster: SimCluster;
  beforeAll(async () => {
    cluster = await startSimCluster({ world, dataDir: tempDir(), logger: silent, serve: 'inference' });
  });
  afterAll(() => cluster.close());

  it('refuses the trainer API with a Tinker-shaped 404 saying it serves only inference', async () => {
    const refused = await tinker(cluster.url)
      .createSession([], {})
      .catch((err: unknown) => err);
    expect((refused as Error).message).toContain('this sim cluster process serves only inference');
    const response = await fetch(`${cluster.url}/api/v1/healthz`);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ detail: expect.stringContaining('the trainer API (/api/v1) is not served here') });
  });

  it('answers chat completions', async () => {
    const completion = await openai(cluster.url).chat.completions.create({ model: BASE, messages, seed: 1 });
    expect(completion.choices[0].message.content).toMatch(/^(Action|Maybe):/);
  });
});

describe('/sim/requests', () => {
  let cluster: SimCluster;
  beforeAll(async () => {
    cluster = await startSimCluster({ world, dataDir: tempDir(), logger: silent });
  });
  afterAll(() => cluster.close());

  it('counts completions by model, adapter loads by name and errors by status, since the last reset', async () => {
    expect((await loadFreshAdapter(cluster, 'run-a-v1')).status).toBe(200);
    const reset = await getJson<SimRequestReport>(`${cluster.url}/sim/requests/reset`, 'POST');
    expect(reset).toMatchObject({ chatCompletions: { total: 0 }, adapterLoads: { total: 0 }, errors: { total: 0 } });

    for (const model of [BASE, BASE, BASE, 'run-a-v1']) expect((await chat(cluster.url, model)).status).toBe(200);
    expect((await chat(cluster.url, 'run-a-v2')).status).toBe(404);
    const completion = await fetch(`${cluster.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'run-a-v1', prompt: [1, 2], max_tokens: 0 }),
    });
    expect(completion.status).toBe(200);
    const badBody = await fetch(`${cluster.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{',
    });
    expect(badBody.status).toBe(400);
    expect((await loadFreshAdapter(cluster, 'run-a-v2')).status).toBe(200);

    const report = await getJson<SimRequestReport>(`${cluster.url}/sim/requests`);
    expect(report).toEqual({
      simulated: true,
      serves: 'all',
      since: reset.since,
      chatCompletions: { total: 4, byModel: { [BASE]: 3, 'run-a-v1': 1 } },
      completions: { total: 1, byModel: { 'run-a-v1': 1 } },
      adapterLoads: { total: 1, byName: { 'run-a-v2': 1 } },
      errors: { total: 2, byStatus: { 400: 1, 404: 1 } },
      inFlight: 0,
    });
    expect(cluster.requests.report()).toEqual(report);
  });

  it('counts a request refused because this process does not serve its part as an error', async () => {
    const trainerOnly = await startSimCluster({ world, dataDir: tempDir(), logger: silent, serve: 'trainer' });
    try {
      expect((await chat(trainerOnly.url)).status).toBe(404);
      expect(await getJson<SimRequestReport>(`${trainerOnly.url}/sim/requests`)).toMatchObject({
        serves: 'trainer',
        chatCompletions: { total: 0 },
        errors: { total: 1, byStatus: { 404: 1 } },
      });
    } finally {
      await trainerOnly.close();
    }
  });

  it('answers 405 to a method it does not take', async () => {
    expect((await fetch(`${cluster.url}/sim/requests`, { method: 'DELETE' })).status).toBe(405);
    expect((await fetch(`${cluster.url}/sim/requests/reset`)).status).toBe(405);
  });
});

describe("an inference-only sim cluster standing for one replica ('agent-rollout-heavy', servers: 1)", () => {
  const PROFILE = 'agent-rollout-heavy';
  /** Slow enough that the first answer comes seconds after the last request is sent. */
  const SPEEDUP = 8;

  /** Sends maxSequencesPerServer + 5 chat completions at once; answers the latency model's admission once every request has reached it. */
  async function admissionOfBurst(cluster: SimCluster) {
    const perReplica = cluster.latency!.profile.inference.maxSequencesPerServer;
    const sent = perReplica + 5;
    const answers = Array.from({ length: sent }, () => chat(cluster.url));
    const seen = await waitFor('every request to reach the latency model', async () => {
      const report = await getJson<LatencyReport>(`${cluster.url}/sim/latency`);
      const inFlight = report.admission.inFlight.reduce((a, b) => a + b, 0);
      return inFlight + report.admission.queued + report.inference.requests === sent ? report : undefined;
    });
    expect((await Promise.all(answers)).map((r) => r.status)).toEqual(Array(sent).fill(200));
    return { perReplica, sent, seen };
  }

  it("admits maxSequencesPerServer sequences at once and queues the rest, where the profile's 4 replicas admit them all", async () => {
    const one = await startSimCluster({
      world,
      dataDir: tempDir(),
      logger: silent,
      serve: 'inference',
      latency: { profile: PROFILE, speedup: SPEEDUP, servers: 1 },
    });
    try {
      const { perReplica, sent, seen } = await admissionOfBurst(one);
      expect(seen.inference.servers).toBe(1);
      expect(seen.admission.inFlight).toEqual([perReplica]);
      expect(seen.admission.queued).toBe(sent - perReplica - seen.inference.requests);
      expect(await getJson<SimRequestReport>(`${one.url}/sim/requests`)).toMatchObject({
        serves: 'inference',
        chatCompletions: { total: sent, byModel: { [BASE]: sent } },
        inFlight: 0,
      });
    } finally {
      await one.close();
    }

    const four = await startSimCluster({
      world,
      dataDir: tempDir(),
      logger: silent,
      serve: 'inference',
      latency: { profile: PROFILE, speedup: SPEEDUP },
    });
    try {
      const { sent, seen } = await admissionOfBurst(four);
      expect(seen.inference.servers).toBe(4);
      expect(seen.admission.queued).toBe(0);
      expect(seen.admission.inFlight.reduce((a, b) => a + b, 0)).toBe(sent - seen.inference.requests);
    } finally {
      await four.close();
    }
  });

  it('refuses a replica count that is not a positive integer', async () => {
    await expect(startSimCluster({ world, dataDir: tempDir(), logger: silent, latency: { profile: PROFILE, servers: 0 } })).rejects.toThrow(
      'latency servers must be an integer >= 1 (got 0)',
    );
  });
});

// ---------------------------------------------------------------------------
// The process entry, as a user starts it

interface SimProcess {
  child: ChildProcess;
  ready: { simulated: boolean; url: string; serves: string };
  stop(): Promise<void>;
}

/** Starts sim-cluster/main.ts and waits for its ready line on stdout. */
async function startProcess(args: string[]): Promise<SimProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'sim-cluster/main.ts', '--port', '0', '--log-level', 'warn', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const firstLine = new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve));
  const line = await Promise.race([
    firstLine,
    exited.then((code) => Promise.reject(new Error(`sim cluster exited (${code}) before it was ready:\n${stderr}`))),
  ]);
  return {
    child,
    ready: JSON.parse(line),
    async stop() {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    },
  };
}

/** Runs main.ts to its exit: its code and stderr. */
async function runToExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'sim-cluster/main.ts', '--port', '0', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, stderr };
}

describe('sim-cluster/main.ts', () => {
  it('refuses flags that mean nothing with the others given, naming each, with exit code 2', async () => {
    const { code, stderr } = await runToExit(['--serve', 'trainer', '--servers', '1', '--keep-adapters', '--data-dir', tempDir()]);
    expect(code).toBe(2);
    expect(stderr).toContain('[SIMULATED] --servers needs --latency <profile>');
    expect(stderr).toContain('[SIMULATED] --keep-adapters is for inference; this process serves only the trainer (--serve trainer)');
    expect(stderr).toContain('[SIMULATED] --servers sets inference replicas; this process serves only the trainer (--serve trainer)');
  });

  it('runs one inference replica (--serve inference --latency P --servers 1), says so on its ready line, and with --keep-adapters serves the adapters loaded before', async () => {
    const dataDir = tempDir();
    const before = await startSimCluster({ world, dataDir, logger: silent });
    try {
      expect((await loadFreshAdapter(before, 'kept-v1')).status).toBe(200);
    } finally {
      await before.close();
    }

    const replica = await startProcess([
      '--serve',
      'inference',
      '--latency',
      'agent-rollout-heavy',
      '--speedup',
      '1000',
      '--servers',
      '1',
      '--keep-adapters',
      '--data-dir',
      dataDir,
    ]);
    try {
      expect(replica.ready).toEqual({ simulated: true, url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/), serves: 'inference' });
      const { url } = replica.ready;
      expect((await getJson<LatencyReport>(`${url}/sim/latency`)).inference.servers).toBe(1);
      expect((await openai(url).models.list()).data.map((m) => m.id)).toContain('kept-v1');
      expect((await chat(url, 'kept-v1')).status).toBe(200);
      expect((await fetch(`${url}/api/v1/healthz`)).status).toBe(404);
    } finally {
      await replica.stop();
    }
  });

  it('runs the trainer alone (--serve trainer) with a short session timeout: the model of a silent session is unloaded', async () => {
    const trainer = await startProcess(['--serve', 'trainer', '--session-timeout-seconds', '0.5', '--data-dir', tempDir()]);
    try {
      expect(trainer.ready).toMatchObject({ simulated: true, serves: 'trainer' });
      const { url } = trainer.ready;
      const client = tinker(url);
      const modelId = await client.createModel({
        sessionId: await client.createSession([], {}),
        modelSeqId: 0,
        baseModel: BASE,
        lora: LORA,
      });
      const status = async () => {
        const response = await fetch(`${url}/api/v1/get_info`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model_id: modelId }),
        });
        return ((await response.json()) as { status: string }).status;
      };
      expect(await status()).toBe('loaded');
      await waitFor('the silent session to expire', async () => ((await status()) === 'unloaded' ? true : undefined), 20_000);
      expect((await chat(url)).status).toBe(404);
    } finally {
      await trainer.stop();
    }
  });
});
