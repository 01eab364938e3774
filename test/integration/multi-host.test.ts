/**
 * A run on a cluster of three hosts made on this machine (test-hosts.ts:
 * network namespaces on a bridge, each host with its own /tmp and .data, so
 * nothing is shared but the network). Temporal, PostgreSQL and the SIMULATED
 * trainer are on the root namespace; each host runs one SIMULATED inference
 * replica (the `balanced` latency profile, one replica a process) and a
 * worker beside it that serves rollouts and its replica's publish queue
 * (`policy.publishVia: replica-workers`); host a also serves the control
 * queue, hosts b and c the trainer queue.
 *
 * A clean run checks the balance and the publishing; a second run meets a
 * fault in the middle of each of its steps:
 *   1. every process of one host SIGKILLed (then the host started anew, empty);
 *   2. one host's link down for 30 s, then up;
 *   3. one inference replica SIGKILLed and started again with no adapters;
 *   4. the host of the trainer worker that owns the run's trainer session lost
 *      during a rollout phase longer than the trainer's session timeout.
 * Every run completes; the trajectories stored equal the rollouts planned;
 * the trainer's optimizer steps equal the training steps; no trainer model is
 * restored (the session was kept by the other trainer worker); and after each
 * publish every replica serves the run's version within the probe tolerance.
 *
 * Needs root (network namespaces); skipped, saying so, elsewhere.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { loadSimWorld } from '../../core/envs/sim/world';
import type { RunConfigInput } from '../../core/config';
import { RunStore } from '../../core/store/run-store';
import { harnessSRun } from '../../workflows';
import { type RunStatus, statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { startSimCluster, type SimCluster } from '../../sim-cluster/server';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { silentLogger, uniqueRunId } from './stack';
import { waitFor } from './waiting';
import { BRIDGE_IP, canMakeTestHosts, type HostProcess, relay, type TestHost, TestNetwork } from './test-hosts';
import { Connection, Client as TemporalClient } from '@temporalio/client';

const describeHosts = canMakeTestHosts() ? describe : describe.skip;
if (!canMakeTestHosts()) process.stderr.write('multi-host.test.ts: skipped: making test hosts needs root, `ip netns` and nsenter\n');

const SPEEDUP = 10;
const SESSION_TIMEOUT_SECONDS = 4;
const REPLICA_PORT = 8000;
const LOGS = mkdtempSync(path.join(os.tmpdir(), 'hs-multi-host-logs-'));

let network: TestNetwork;
let trainer: SimCluster;
let store: RunStore;
let client: Client;
let relays: Array<{ port: number; close(): Promise<void> }> = [];
let env: NodeJS.ProcessEnv;

const replicaUrl = (host: TestHost) => `http://${host.ip}:${REPLICA_PORT}/v1`;
const figures: string[] = [];
const note = (line: string) => {
  figures.push(line);
  process.stderr.write(`[multi-host] ${line}\n`);
};

/** The processes of a host: its replica, then its worker (with the queues it serves), each started and ready. */
async function startHost(host: TestHost, queues: string): Promise<void> {
  await startReplica(host);
  const worker = host.start(
    'worker',
    [
      process.execPath,
      '--import',
      'tsx',
      'workers/main.ts',
      '--queues',
      queues,
      '--identity',
      `host-${host.name}`,
      '--replica-url',
      replicaUrl(host),
    ],
    env,
  );
  await ready(worker, /"ready":true/);
}

async function startReplica(host: TestHost): Promise<HostProcess> {
  const replica = host.start(
    'replica',
    [
      process.execPath,
      '--import',
      'tsx',
      'sim-cluster/main.ts',
      '--serve',
      'inference',
      '--host',
      host.ip,
      '--port',
      String(REPLICA_PORT),
      '--data-dir',
      '.data/sim-replica',
      '--latency',
      'balanced',
      '--servers',
      '1',
      '--speedup',
      String(SPEEDUP),
      '--log-level',
      'warn',
    ],
    env,
  );
  await ready(replica, /"simulated":true/);
  return replica;
}

function ready(proc: HostProcess, line: RegExp, timeoutMs = 90_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(
      () => reject(new Error(`${proc.name} (pid ${proc.pid}) did not say it is ready within ${timeoutMs / 1000} s; logs in ${LOGS}`)),
      timeoutMs,
    );
    proc.child.stdout!.on('data', (d: Buffer) => {
      seen += d.toString();
      if (line.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    });
    void proc.exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${proc.name} exited (${code}) before it was ready; logs in ${LOGS}`));
    });
  });
}

beforeAll(async () => {
  if (!canMakeTestHosts()) return;
  store = RunStore.connect(TEST_DATABASE_URL);
  client = new TemporalClient({ connection: await Connection.connect({ address: TEST_TEMPORAL_ADDRESS }) });
  network = await TestNetwork.create(['a', 'b', 'c'], LOGS);
  const [temporalHost, temporalPort] = TEST_TEMPORAL_ADDRESS.split(':');
  const pg = new URL(TEST_DATABASE_URL);
  relays = [
    await relay(0, { host: temporalHost, port: Number(temporalPort) }),
    await relay(0, { host: pg.hostname, port: Number(pg.port || 5432) }),
  ];
  pg.hostname = BRIDGE_IP;
  pg.port = String(relays[1].port);
  trainer = await startSimCluster({
    world: loadSimWorld(),
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'hs-multi-host-trainer-')),
    host: BRIDGE_IP,
    port: 0,
    logger: silentLogger,
    serve: 'trainer',
    latency: { profile: 'balanced', speedup: SPEEDUP },
    trainerSessionTimeoutMs: SESSION_TIMEOUT_SECONDS * 1000,
  });
  const { HARNESS_S_ADAPTER_DIR: _shared, ...inherited } = process.env;
  env = {
    ...inherited,
    TEMPORAL_ADDRESS: `${BRIDGE_IP}:${relays[0].port}`,
    DATABASE_URL: pg.toString(),
    HARNESS_S_METRICS_PORT: 'off',
    HARNESS_S_TRAINER_HEARTBEAT_SECONDS: '1',
    LOG_LEVEL: 'info',
  };
  await Promise.all([
    startHost(network.host('a'), 'control,rollout'),
    startHost(network.host('b'), 'rollout,trainer'),
    startHost(network.host('c'), 'rollout,trainer'),
  ]);
}, 240_000);

afterAll(async () => {
  if (!canMakeTestHosts()) return;
  await network?.close();
  for (const r of relays) await r.close();
  await trainer?.close();
  await store?.close();
  await client?.connection.close();
  process.stderr.write(`[multi-host] figures:\n  ${figures.join('\n  ')}\n[multi-host] logs: ${LOGS}\n`);
}, 60_000);

function runConfig(name: string, steps: number): RunConfigInput {
  const replicas = network.hosts.map(replicaUrl);
  return {
    name,
    env: { kind: 'sim' },
    steps,
    seed: 11,
    policy: { baseUrl: replicas[0], inferenceServers: replicas, publishVia: 'replica-workers', maxInFlightPerServer: 32 },
    trainer: { baseUrl: trainer.url, pollSeconds: 0.05 },
    rollout: { tasksPerStep: 12, groupSize: 4, maxTurns: 5, concurrency: 8 },
    rescue: { enabled: true, k: 2 },
    router: { probeTasksPerKind: 1, probeRollouts: 2, reanchorEvery: 0 },
    eval: { enabled: false },
    checkpoint: { every: 1 },
  };
}

async function status(runId: string): Promise<RunStatus> {
  return client.workflow.getHandle(runId).query(statusQuery);
}

/** Waits until step `step` is in its rollout phase and has stored a rollout. */
async function midRollouts(runId: string, step: number): Promise<void> {
  await waitFor(
    `step ${step}'s rollouts`,
    async () => {
      // A query may fail while the run's worker is being replaced: ask again.
      const s = await status(runId).catch(() => null);
      if (!s?.inFlight?.some((f) => f.step === step && f.phase === 'rollouts')) return false;
      return (await storedInStep(runId, step)) > 0;
    },
    240_000,
  );
}

async function storedInStep(runId: string, step: number): Promise<number> {
  const { rows } = await store.queryForTests(
    "SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1 AND phase = 'train' AND step = $2",
    [runId, step],
  );
  return rows[0].n;
}

async function requestsServed(host: TestHost): Promise<number> {
  const body = (await (await fetch(`http://${host.ip}:${REPLICA_PORT}/sim/requests`)).json()) as { chatCompletions: { total: number } };
  return body.chatCompletions.total;
}

async function modelsOf(host: TestHost): Promise<Set<string>> {
  const body = (await (await fetch(`${replicaUrl(host)}/models`)).json()) as { data: Array<{ id: string }> };
  return new Set(body.data.map((m) => m.id));
}

/** Every trajectory planned is stored once; one optimizer step per training step; no model restored. */
async function expectRunIntact(runId: string, steps: number): Promise<void> {
  const recorded = (await store.steps(runId)).map((s) => s.summary);
  expect(recorded.map((s) => s.step)).toEqual([...Array(steps).keys()]);
  const planned = recorded.reduce((n, s) => n + s.baseRollouts + s.rescueRollouts, 0);
  expect(await store.countTrajectories(runId)).toBe(planned);
  for (const s of recorded) expect(s.baseRollouts).toBe(12 * 4);
  const model = (await store.getRun(runId))!.trainerModelId!;
  const info = (await (
    await fetch(`${trainer.url}/api/v1/get_info`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model_id: model }),
    })
  ).json()) as { optim_steps: number };
  expect(info.optim_steps).toBe(recorded.filter((s) => s.datums > 0).length);
  expect(await store.restores(runId)).toEqual([]);
}

describeHosts('a run on three hosts', () => {
  test('spreads rollouts over every replica, and after each publish every replica serves the version within the probe tolerance', async () => {
    for (const host of network.hosts) await fetch(`http://${host.ip}:${REPLICA_PORT}/sim/requests/reset`, { method: 'POST' });
    const runId = uniqueRunId('multi-host-clean');
    const started = Date.now();
    await client.workflow.execute(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: runConfig('multi-host-clean', 2) }],
    });
    note(`clean run, 2 steps of 12 tasks x G=4 on 3 hosts: ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const served = await Promise.all(network.hosts.map(requestsServed));
    const mean = served.reduce((a, b) => a + b, 0) / served.length;
    note(`requests per replica: ${served.join(', ')} (mean ${mean.toFixed(1)})`);
    // Every replica takes a share near a third. Not an exact third: the balancer sends a request to the replica
    // with the fewest in flight, so a replica its host's CPU slows (the suite's other lanes share this machine's
    // two cores) rightly takes fewer; the exact split over equal replicas is test/unit/replica-balancer.test.ts's.
    // One replica left idle or given every request is 100% or 200% off the mean; the worst seen under load, 25%.
    for (const n of served) expect(Math.abs(n - mean) / mean).toBeLessThanOrEqual(0.4);

    for (const step of await store.steps(runId)) {
      for (const host of network.hosts) {
        const row = await store.replicas.get(replicaUrl(host), step.policyVersion);
        expect(row).toMatchObject({ state: 'ready' });
        expect(row!.probeMeanAbsDiff).toBeLessThanOrEqual(0.05);
      }
    }
    const last = (await store.lastStep(runId))!.policyVersion;
    for (const host of network.hosts) expect(await modelsOf(host)).toContain(last);
    await expectRunIntact(runId, 2);
  });

  test('goes on through a lost host, a cut link, a restarted replica and a lost trainer-worker host, and loses nothing', async () => {
    const runId = uniqueRunId('multi-host-faults');
    const steps = 6;
    const handle = await client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: runConfig('multi-host-faults', steps) }],
    });
    const [a, b, c] = ['a', 'b', 'c'].map((n) => network.host(n));

    // 3. Step 1: host a's replica SIGKILLed and started again, without its adapters.
    await midRollouts(runId, 1);
    await a.kill('replica');
    const restartedAt = Date.now();
    await startReplica(a);
    await waitFor('the restarted replica to take requests again', async () => (await requestsServed(a).catch(() => 0)) > 0);
    note(`fault 3: a restarted replica took requests again ${((Date.now() - restartedAt) / 1000).toFixed(1)} s after its restart`);

    // 4. Step 2: the host of the trainer worker that owns the run's trainer session lost in the rollouts; its
    // groups there wait out their heartbeat timeout, so the rollout phase outlasts the session timeout.
    await midRollouts(runId, 2);
    const owner = await sessionOwner(runId);
    await owner.lose();
    const lostAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, (SESSION_TIMEOUT_SECONDS + 6) * 1000));
    note(
      `fault 4: host ${owner.name} (its worker opened the trainer session) lost for ${((Date.now() - lostAt) / 1000).toFixed(0)} s in step 2's rollouts, session timeout ${SESSION_TIMEOUT_SECONDS} s`,
    );
    await owner.boot();
    await startHost(owner, 'rollout,trainer');

    // 2. Step 3: host b's link down for 30 s.
    await midRollouts(runId, 3);
    b.linkDown();
    await new Promise((resolve) => setTimeout(resolve, 30_000));
    b.linkUp();
    note('fault 2: host b cut off for 30 s in step 3');

    // 1. Step 4: every process of host c SIGKILLed, then the host started anew (empty .data).
    await midRollouts(runId, 4);
    await c.lose();
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    await c.boot();
    await startHost(c, 'rollout,trainer');
    note('fault 1: host c lost in step 4 and started anew');

    await handle.result();
    const recorded = (await store.steps(runId)).map((s) => s.summary);
    note(
      `step seconds: ${recorded.map((s) => `${s.step}: ${s.durationSeconds.toFixed(1)} (rollouts ${s.phaseSeconds?.rollout.toFixed(1)}, train ${s.phaseSeconds?.train.toFixed(1)}, publish ${s.phaseSeconds?.publish.toFixed(1)})`).join(', ')} (faults: 1 replica restart, 2 session owner lost, 3 link down, 4 host lost)`,
    );
    await expectRunIntact(runId, steps);
    const last = (await store.lastStep(runId))!.policyVersion;
    await waitFor('every replica to serve the last version', async () => {
      for (const host of network.hosts) if (!(await modelsOf(host)).has(last)) return false;
      return true;
    });
    for (const host of network.hosts) expect(await store.replicas.get(replicaUrl(host), last)).toMatchObject({ state: 'ready' });
  }, 600_000);
});

/**
 * The host whose trainer worker opened the session that owns the run's trainer
 * model: the worker that ran step 0's trainStep (it created the model in its
 * session), as the step's history records its identity.
 */
async function sessionOwner(runId: string): Promise<TestHost> {
  const history = await client.workflow.getHandle(`${runId}/step-0`).fetchHistory();
  const events = history.events ?? [];
  const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'trainStep');
  const started = events.find(
    (e) =>
      e.activityTaskStartedEventAttributes && String(e.activityTaskStartedEventAttributes.scheduledEventId) === String(scheduled?.eventId),
  );
  const identity = started?.activityTaskStartedEventAttributes?.identity;
  const host = network.hosts.find((h) => identity === `host-${h.name}`);
  if (!host) throw new Error(`step 0 of ${runId} was trained by '${identity}', not by a test host's worker`);
  return host;
}
