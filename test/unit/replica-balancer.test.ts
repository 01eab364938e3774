/**
 * The client-side balancer over inference replicas (core/policy/replica-balancer.ts,
 * replica-policy.ts), against SIMULATED inference replicas in this process
 * (the sim cluster's vLLM subset over real HTTP): where turns go, what a
 * replica that dies, comes back or forgets its adapters does to them.
 */
import { mkdtempSync, promises as fs } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { initialParams } from '../../core/envs/sim/policy-model';
import { loadSimWorld } from '../../core/envs/sim/world';
import { ReplicaAddresses } from '../../core/policy/replica-addresses';
import { NoReplicaError, ReplicaBalancer } from '../../core/policy/replica-balancer';
import { ReplicaPolicy } from '../../core/policy/replica-policy';
import type { ReplicaReadiness } from '../../core/policy/replicas';
import { type SimCluster, startSimCluster } from '../../sim-cluster/server';
import { SIM_ADAPTER_PARAMS_FILE } from '../../sim-cluster/checkpoints';

const logger = pino({ level: 'silent' });
const world = loadSimWorld();
const BASE = world.model.name;
const messages = [{ role: 'user' as const, content: 'task: lookup' }];

/** The run store's part, in memory: which replicas have which versions, and what was reported lost. */
class Readiness implements ReplicaReadiness {
  readonly ready = new Map<string, Set<string>>();
  readonly lost: Array<{ replica: string; version: string }> = [];
  async readyReplicas(version: string) {
    const ready = this.ready.get(version);
    return { known: ready !== undefined, ready: new Map([...(ready ?? [])].map((r): [string, number] => [r, 0])) };
  }
  async markLost(replica: string, version: string) {
    this.lost.push({ replica, version });
    this.ready.get(version)?.delete(replica);
    return 1;
  }
}

interface Replica {
  cluster: SimCluster;
  url: string;
  port: number;
  dataDir: string;
}

const replicas: Replica[] = [];
const balancers: ReplicaBalancer[] = [];

async function startReplica(
  port = 0,
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'hs-replica-')),
  latency?: { profile: string; speedup: number },
): Promise<Replica> {
  const cluster = await startSimCluster({ world, dataDir, logger, port, latency });
  const replica = { cluster, url: `${cluster.url}/v1`, port: cluster.port, dataDir };
  replicas.push(replica);
  return replica;
}

async function stopReplica(replica: Replica): Promise<void> {
  await replica.cluster.close();
  replicas.splice(replicas.indexOf(replica), 1);
}

function balancer(readiness: ReplicaReadiness = new Readiness(), options: { noReplicaMs?: number } = {}): ReplicaBalancer {
  const b = new ReplicaBalancer({ readiness, logger, healthCheckMs: 100, readinessTtlMs: 50, noReplicaMs: options.noReplicaMs ?? 5000 });
  balancers.push(b);
  return b;
}

function policyOver(b: ReplicaBalancer, servers: string[], maxInFlightPerServer = 64): ReplicaPolicy {
  return new ReplicaPolicy(b, { servers, baseModel: BASE, apiKey: 'x', requestTimeoutSeconds: 10, maxInFlightPerServer });
}

/** Chat completions each replica answered, as the replica counts them. */
async function served(replica: Replica): Promise<number> {
  const response = await fetch(`${replica.cluster.url}/sim/requests`);
  const body = (await response.json()) as { chatCompletions: { total: number } };
  return body.chatCompletions.total;
}

/** A sim adapter folder (its parameters are the base's), loaded on the replica under `name`. */
async function loadAdapter(replica: Replica, name: string): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hs-adapter-'));
  await fs.writeFile(path.join(dir, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: 8, base_model_name_or_path: BASE }));
  const record = {
    version: 1,
    modelId: 'm',
    name,
    baseModel: BASE,
    optimSteps: 1,
    savedAt: new Date().toISOString(),
    params: initialParams(world),
  };
  await fs.writeFile(path.join(dir, SIM_ADAPTER_PARAMS_FILE), JSON.stringify(record));
  const response = await fetch(`${replica.url}/load_lora_adapter`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ lora_name: name, lora_path: dir }),
  });
  expect(response.status).toBe(200);
}

afterEach(async () => {
  for (const b of balancers.splice(0)) b.close();
  for (const r of replicas.splice(0)) await r.cluster.close();
});

describe('the replica balancer', () => {
  test('spreads episodes evenly over the replicas', async () => {
    const rs = [await startReplica(), await startReplica(), await startReplica()];
    const policy = policyOver(
      balancer(),
      rs.map((r) => r.url),
    );
    for (let i = 0; i < 30; i++) await policy.episode().complete({ model: BASE, messages, temperature: 1, seed: i });
    expect(await Promise.all(rs.map(served))).toEqual([10, 10, 10]);
  });

  test("keeps an episode's turns on the replica it started on", async () => {
    const rs = [await startReplica(), await startReplica()];
    const b = balancer();
    const policy = policyOver(
      b,
      rs.map((r) => r.url),
    );
    // Two episodes in flight at once, four turns each: each stays where it started.
    const first = policy.episode();
    const second = policy.episode();
    for (let turn = 0; turn < 4; turn++) {
      await Promise.all([
        first.complete({ model: BASE, messages, temperature: 1, seed: turn }),
        second.complete({ model: BASE, messages, temperature: 1, seed: turn }),
      ]);
    }
    expect((await Promise.all(rs.map(served))).sort()).toEqual([4, 4]);
  });

  test('caps the requests in flight per replica with a queue, first come first served', async () => {
    const [r] = [await startReplica()];
    const b = balancer();
    const request = { servers: [r.url], model: BASE, baseModel: BASE, maxInFlight: 2 };
    const held = [await b.acquire(request), await b.acquire(request)];
    const order: number[] = [];
    const waiting = [b.acquire(request).then((l) => (order.push(1), l)), b.acquire(request).then((l) => (order.push(2), l))];
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(order).toEqual([]);
    expect(b.views([r.url])[0].inFlight).toBe(2);
    held[0].release('ok');
    const third = await waiting[0];
    expect(order).toEqual([1]);
    held[1].release('ok');
    await waiting[1];
    expect(order).toEqual([1, 2]);
    third.release('ok');
  });

  test('a replica that dies leaves the rotation; its turns go to the others; it comes back when it answers again', async () => {
    const rs = [await startReplica(), await startReplica()];
    const b = balancer();
    const policy = policyOver(
      b,
      rs.map((r) => r.url),
    );
    const { port, dataDir } = rs[0];
    await stopReplica(rs[0]);
    for (let i = 0; i < 6; i++) await policy.episode().complete({ model: BASE, messages, temperature: 1, seed: i });
    expect(await served(rs[1])).toBe(6);
    const [down] = b.views([`http://127.0.0.1:${port}/v1`]);
    expect(down).toMatchObject({ healthy: false });
    expect(down.reason).toMatch(/unreachable/);

    const back = await startReplica(port, dataDir);
    await waitFor(() => b.views([back.url])[0].healthy);
    for (let i = 0; i < 6; i++) await policy.episode().complete({ model: BASE, messages, temperature: 1, seed: i });
    expect(await served(back)).toBeGreaterThanOrEqual(2);
  });

  test('a replica that stops answering while a turn waits on it (its host cut off) is found by its health check, and the turn goes to another', async () => {
    const slow = await startReplica(0, undefined, { profile: 'balanced', speedup: 1 });
    const other = await startReplica();
    const relay = await startRelay(slow.port);
    const b = new ReplicaBalancer({
      readiness: new Readiness(),
      logger,
      healthCheckMs: 100,
      watchMs: 200,
      healthTimeoutMs: 300,
      watchTimeoutMs: 300,
    });
    balancers.push(b);
    const cutOff = `http://127.0.0.1:${relay.port}/v1`;
    const policy = policyOver(b, [cutOff, other.url]);
    // The first turn goes to the relayed replica (fewest requests, listed first), which takes seconds to answer it.
    const turn = policy.episode().complete({ model: BASE, messages, temperature: 1, seed: 1 });
    await waitFor(() => b.views([cutOff])[0].inFlight === 1);
    relay.blackHole();
    const started = Date.now();
    await turn;
    // Not the request's own 10 s timeout: the health check found the replica gone.
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await served(other)).toBe(1);
    expect(b.views([cutOff])[0]).toMatchObject({ healthy: false, inFlight: 0 });
    relay.close();
  });

  test('a replica that wants a key stays in rotation while its turns take long: its health checks send the key', async () => {
    const slow = await startReplica(0, undefined, { profile: 'balanced', speedup: 1 });
    const gate = await startKeyGate(slow.port, 'sk-replica');
    const b = new ReplicaBalancer({
      readiness: new Readiness(),
      logger,
      healthCheckMs: 100,
      watchMs: 100,
      healthTimeoutMs: 300,
      watchTimeoutMs: 300,
    });
    balancers.push(b);
    const keyed = `http://127.0.0.1:${gate.port}/v1`;
    const policy = new ReplicaPolicy(b, {
      servers: [keyed],
      baseModel: BASE,
      apiKey: 'sk-replica',
      requestTimeoutSeconds: 30,
      maxInFlightPerServer: 4,
    });
    const reply = await policy.episode().complete({ model: BASE, messages, temperature: 1, seed: 1 });
    expect(reply.content.length).toBeGreaterThan(0);
    // Its health was checked while the turn was in flight, with the key, and it never left the rotation.
    expect(gate.modelChecks.length).toBeGreaterThan(0);
    expect(gate.modelChecks.every((auth) => auth === 'Bearer sk-replica')).toBe(true);
    expect(b.views([keyed])[0]).toMatchObject({ healthy: true, inFlight: 0, reason: null });
    await gate.close();
  });

  test('a published version goes only to the replicas that loaded it', async () => {
    const rs = [await startReplica(), await startReplica(), await startReplica()];
    const readiness = new Readiness();
    await loadAdapter(rs[1], 'run-v1');
    readiness.ready.set('run-v1', new Set([rs[1].url]));
    const policy = policyOver(
      balancer(readiness),
      rs.map((r) => r.url),
    );
    for (let i = 0; i < 6; i++) await policy.episode().complete({ model: 'run-v1', messages, temperature: 1, seed: i });
    expect(await Promise.all(rs.map(served))).toEqual([0, 6, 0]);
  });

  test('a replica that forgot the version (a restart) is reported lost and the turn goes to another', async () => {
    const rs = [await startReplica(), await startReplica()];
    const readiness = new Readiness();
    for (const r of rs) await loadAdapter(r, 'run-v2');
    readiness.ready.set('run-v2', new Set(rs.map((r) => r.url)));
    const policy = policyOver(
      balancer(readiness),
      rs.map((r) => r.url),
    );
    // The first replica restarts and forgets its runtime-loaded adapters, as vLLM does.
    const { port, dataDir } = rs[0];
    await stopReplica(rs[0]);
    const restarted = await startReplica(port, dataDir);
    for (let i = 0; i < 4; i++) await policy.episode().complete({ model: 'run-v2', messages, temperature: 1, seed: i });
    expect(readiness.lost).toEqual([{ replica: restarted.url, version: 'run-v2' }]);
    expect(await served(rs[1])).toBe(4);
  });

  test('a replica found without the version stays out for it, whatever an older read of the store says, until it is made ready again', async () => {
    const rs = [await startReplica(), await startReplica()];
    for (const r of rs) await loadAdapter(r, 'run-v3');
    // A store read that lags: both replicas ready since t=0, whatever happens.
    let readyAt = 0;
    const stale: ReplicaReadiness = {
      readyReplicas: async () => ({
        known: true,
        ready: new Map([
          [rs[0].url, readyAt],
          [rs[1].url, 0],
        ]),
      }),
      markLost: async () => 1,
    };
    const b = balancer(stale);
    const policy = policyOver(
      b,
      rs.map((r) => r.url),
    );
    const { port, dataDir } = rs[0];
    await stopReplica(rs[0]);
    const restarted = await startReplica(port, dataDir);
    for (let i = 0; i < 6; i++) await policy.episode().complete({ model: 'run-v3', messages, temperature: 1, seed: i });
    expect(await served(restarted)).toBe(0);
    // Its keeper loads it again and the store says so (made ready after the loss): it takes requests again.
    await loadAdapter(restarted, 'run-v3');
    readyAt = 2;
    await new Promise((resolve) => setTimeout(resolve, 100));
    for (let i = 0; i < 6; i++) await policy.episode().complete({ model: 'run-v3', messages, temperature: 1, seed: i });
    expect(await served(restarted)).toBeGreaterThan(0);
  });

  test('with no replica able to serve the model, waiting turns fail with NoReplicaError naming each replica', async () => {
    const r = await startReplica();
    const url = r.url;
    await stopReplica(r);
    const policy = policyOver(balancer(new Readiness(), { noReplicaMs: 300 }), [url]);
    const failed = policy.episode().complete({ model: BASE, messages, temperature: 1, seed: 1 });
    await expect(failed).rejects.toBeInstanceOf(NoReplicaError);
    await expect(failed).rejects.toThrow(new RegExp(`${url.replace(/[.]/g, '\\.')}: out of rotation \\(unreachable`));
  });

  test('a version the store has no record of (published by an older worker) goes to every replica', async () => {
    const rs = [await startReplica(), await startReplica()];
    for (const r of rs) await loadAdapter(r, 'legacy-v');
    const policy = policyOver(
      balancer(new Readiness()),
      rs.map((r) => r.url),
    );
    for (let i = 0; i < 4; i++) await policy.episode().complete({ model: 'legacy-v', messages, temperature: 1, seed: i });
    expect(await Promise.all(rs.map(served))).toEqual([2, 2]);
  });

  test('a request the replica refuses itself (an unknown base model) fails at once, with no replica blamed', async () => {
    const r = await startReplica();
    const b = balancer();
    const policy = new ReplicaPolicy(b, {
      servers: [r.url],
      baseModel: 'no-such-model',
      apiKey: 'x',
      requestTimeoutSeconds: 10,
      maxInFlightPerServer: 4,
    });
    await expect(policy.episode().complete({ model: 'no-such-model', messages, temperature: 1, seed: 1 })).rejects.toMatchObject({
      status: 404,
    });
    expect(b.views([r.url])[0]).toMatchObject({ healthy: true, inFlight: 0 });
  });
});

describe('replica addresses', () => {
  test('a host name with several addresses is one replica per address; one address or an IP stays as given', async () => {
    const addresses = new ReplicaAddresses(async (host) => (host === 'vllm' ? ['172.18.0.7', '172.18.0.5', '172.18.0.6'] : ['10.0.0.9']));
    expect(await addresses.expand(['http://vllm:8000/v1/', 'http://trainer-box:8000/v1', 'http://10.1.2.3:8000/v1'])).toEqual([
      'http://172.18.0.5:8000/v1',
      'http://172.18.0.6:8000/v1',
      'http://172.18.0.7:8000/v1',
      'http://trainer-box:8000/v1',
      'http://10.1.2.3:8000/v1',
    ]);
  });

  test('a name is looked up again after a while, so replicas added later are found', async () => {
    let now = 0;
    let answer = ['172.18.0.5', '172.18.0.6'];
    const addresses = new ReplicaAddresses(
      async () => answer,
      () => now,
    );
    expect(await addresses.expand(['http://vllm:8000/v1'])).toHaveLength(2);
    answer = ['172.18.0.5', '172.18.0.6', '172.18.0.7'];
    expect(await addresses.expand(['http://vllm:8000/v1'])).toHaveLength(2);
    now += 60_000;
    expect(await addresses.expand(['http://vllm:8000/v1'])).toHaveLength(3);
  });
});

/** A TCP relay to a replica that can turn into a black hole: connections stay open, nothing gets through (a host cut off). */
async function startRelay(target: number): Promise<{ port: number; blackHole(): void; close(): void }> {
  const sockets = new Set<net.Socket>();
  let dropping = false;
  const server = net.createServer((client) => {
    sockets.add(client);
    if (dropping) return;
    const upstream = net.connect(target, '127.0.0.1');
    sockets.add(upstream);
    client.on('data', (d) => void (dropping || upstream.write(d)));
    upstream.on('data', (d) => void (dropping || client.write(d)));
    for (const s of [client, upstream]) s.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as net.AddressInfo).port,
    blackHole: () => void (dropping = true),
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/** An HTTP front for a replica that answers 401 without `Bearer <key>`, as vLLM started with --api-key does. */
async function startKeyGate(target: number, key: string): Promise<{ port: number; modelChecks: string[]; close(): Promise<void> }> {
  const modelChecks: string[] = [];
  const server = http.createServer((req, res) => {
    const auth = req.headers.authorization ?? '';
    if (req.url?.endsWith('/models')) modelChecks.push(auth);
    if (auth !== `Bearer ${key}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"invalid API key"}');
      return;
    }
    const upstream = http.request(
      { host: '127.0.0.1', port: target, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as net.AddressInfo).port,
    modelChecks,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function waitFor(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
