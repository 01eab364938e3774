/**
 * A worker process serves /metrics on $HARNESS_S_METRICS_PORT while it runs a
 * sim run: the Temporal SDK's runtime metrics and the project's own, whose
 * counts equal what the run store holds. The trainer is reached through a
 * fault proxy, so its re-polls and resubmits are counted too.
 */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { metricsRegistry } from '../../core/metrics';
import { PolicyClient } from '../../core/policy/client';
import { harnessSRun } from '../../workflows';
import { statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { startFaultProxy, type FaultProxy } from './fault-proxy';
import { startTestStack, uniqueRunId, type TestStack } from './stack';
import { startWorkerProcess, stopWorkerProcesses } from './worker-process';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

let stack: TestStack;
let trainerProxy: FaultProxy;
let worker: ChildProcess | undefined;
let metricsUrl: string;
/** When the worker process started, on the run store's clock: everything stored since, it stored. */
let workerStartedAt: Date;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The samples of a Prometheus text exposition. */
function parseExposition(text: string): Sample[] {
  return text.split('\n').flatMap((line) => {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!match) return [];
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
    return [{ name: match[1], labels, value: Number(match[3]) }];
  });
}

/** The sum of a metric's samples whose labels include `labels`. */
function total(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((n, s) => n + s.value, 0);
}

async function scrape(): Promise<{ status: number; text: string; samples: Sample[] }> {
  const response = await fetch(metricsUrl);
  const text = await response.text();
  return { status: response.status, text, samples: parseExposition(text) };
}

beforeAll(async () => {
  stack = await startTestStack({ workers: false });
  trainerProxy = await startFaultProxy(stack.sim.url);
  const port = await freePort();
  metricsUrl = `http://127.0.0.1:${port}/metrics`;
  workerStartedAt = (await stack.store.queryForTests('SELECT now() AS now')).rows[0].now;
  worker = await startWorkerProcess(undefined, { HARNESS_S_METRICS_PORT: String(port) });
});
afterAll(async () => {
  if (worker) await stopWorkerProcesses([worker]);
  await trainerProxy?.close();
  await stack?.close();
});

test("a worker process serves the Temporal SDK's and the project's metrics during a run, and their counts equal the run store's", async () => {
  const STEPS = 3;
  const runId = uniqueRunId('metrics');
  const retrieveFuture = (method: string, path: string) => method === 'POST' && path === '/api/v1/retrieve_future';
  trainerProxy.faults.push({ match: retrieveFuture, status: 503 }, { match: retrieveFuture, status: 410 });
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: stack.config({
          steps: STEPS,
          rollout: { tasksPerStep: 4, groupSize: 4, maxTurns: 5, concurrency: 2 },
          trainer: { baseUrl: trainerProxy.url, pollSeconds: 0.02 },
          // A rule any step with a group without signal trips: the run ends stalled.
          health: { minLiveShare: 1, steps: 1, evaluations: 0 },
        }),
      },
    ],
  });

  // During the run: some training rollouts stored, not every step recorded.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const stored = await stack.store.countTrajectories(runId);
    if (stored > 0 && (await stack.store.steps(runId)).length < STEPS) break;
    if (Date.now() > deadline) throw new Error('never caught the run while it trained');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const during = await scrape();
  expect(during.status).toBe(200);
  expect(total(during.samples, 'harness_s_rollouts_stored_total')).toBeGreaterThan(0);
  // The SDK's runtime metrics, from its Prometheus exporter, for this worker's queues.
  expect(during.samples.some((s) => s.name.startsWith('temporal_') && s.labels.task_queue === TASK_QUEUES.rollout)).toBe(true);
  // No metric is described twice (the project's names and the SDK's do not collide).
  const described = during.text
    .split('\n')
    .filter((l) => l.startsWith('# TYPE '))
    .map((l) => l.split(' ')[2]);
  expect(described.length).toBeGreaterThan(0);
  expect(new Set(described).size).toBe(described.length);

  expect((await handle.result()).stepsCompleted).toBe(STEPS);
  const after = (await scrape()).samples;

  // Rollouts by harness, role and outcome: everything stored since the worker started, it stored.
  const { rows } = await stack.store.queryForTests(
    `SELECT harness_id, role, success, count(*)::int AS n FROM trajectories WHERE created_at >= $1 GROUP BY 1, 2, 3`,
    [workerStartedAt],
  );
  expect(rows.length).toBeGreaterThan(0);
  for (const r of rows) {
    const labels = { env: 'sim', harness: r.harness_id, role: r.role, outcome: r.success ? 'success' : 'failure' };
    expect({ ...labels, count: total(after, 'harness_s_rollouts_stored_total', labels) }).toEqual({ ...labels, count: r.n });
  }
  const storedRollouts = rows.reduce((n, r) => n + r.n, 0);
  expect(total(after, 'harness_s_rollouts_stored_total')).toBe(storedRollouts);
  // Every stored rollout was an episode this worker ran (a retried episode counts again).
  expect(
    total(after, 'harness_s_episodes_total', { outcome: 'success' }) + total(after, 'harness_s_episodes_total', { outcome: 'failure' }),
  ).toBeGreaterThanOrEqual(storedRollouts);

  // Steps: dead and rescued groups are the sums over the recorded summaries; each step's phases observed once.
  const steps = (await stack.store.queryForTests(`SELECT summary FROM steps WHERE completed_at >= $1`, [workerStartedAt])).rows.map(
    (r) => r.summary,
  );
  expect(steps.length).toBe(STEPS);
  expect(total(after, 'harness_s_steps_recorded_total', { env: 'sim' })).toBe(steps.length);
  expect(total(after, 'harness_s_dead_groups_total', { env: 'sim' })).toBe(steps.reduce((n, s) => n + s.deadGroups, 0));
  expect(total(after, 'harness_s_rescued_groups_total', { env: 'sim' })).toBe(steps.reduce((n, s) => n + s.rescuedGroups, 0));
  for (const phase of ['rollout', 'train', 'publish']) {
    expect(total(after, 'harness_s_step_phase_seconds_count', { env: 'sim', phase })).toBe(steps.length);
    expect(total(after, 'harness_s_step_phase_seconds_sum', { env: 'sim', phase })).toBeCloseTo(
      steps.reduce((n, s) => n + s.phaseSeconds[phase], 0),
      6,
    );
  }

  // A rescue latency per rescue group started (one first attempt each), and the trainer's ops timed.
  const { rows: rescues } = await stack.store.queryForTests(
    `SELECT count(DISTINCT (run_id, phase, step, task_id))::int AS n FROM trajectories WHERE created_at >= $1 AND role = 'rescue'`,
    [workerStartedAt],
  );
  expect(total(after, 'harness_s_rescue_latency_seconds_count')).toBe(rescues[0].n);
  expect(total(after, 'harness_s_trainer_op_seconds_count', { op: 'optim_step', outcome: 'ok' })).toBeGreaterThanOrEqual(
    steps.filter((s) => s.datums > 0).length,
  );
  expect(total(after, 'harness_s_policy_request_seconds_count', { outcome: 'ok' })).toBeGreaterThan(0);

  // The trainer's injected faults: one future polled again after a 503, one op sent again after a 410.
  expect(trainerProxy.faults).toEqual([]);
  expect(total(after, 'harness_s_trainer_retries_total', { reason: 'server_error' })).toBe(1);
  expect(total(after, 'harness_s_trainer_retries_total', { reason: 'future_gone' })).toBe(1);

  // The health rule's verdict, as the run's status has it, is the worker's gauge for the run.
  const status = await handle.query(statusQuery);
  expect(status.health?.state).toBe('stalled');
  expect(total(after, 'harness_s_run_stalled', { run_id: runId, env: 'sim' })).toBe(1);
}, 180_000);

test('a policy request the endpoint refuses is counted as an error by its HTTP status', async () => {
  const endpoint = await startFaultProxy(stack.sim.url, { requireKey: 'the-right-key' });
  try {
    const policy = new PolicyClient({ baseUrl: `${endpoint.url}/v1`, apiKey: 'a-wrong-key', requestTimeoutSeconds: 10 });
    await expect(
      policy.complete({ model: 'sim-policy-base', messages: [{ role: 'user', content: 'hi' }], temperature: 1, seed: 1 }),
    ).rejects.toThrow(/401/);
    const samples = parseExposition(await metricsRegistry.metrics());
    expect(total(samples, 'harness_s_policy_request_errors_total', { status: '401' })).toBe(1);
    expect(total(samples, 'harness_s_policy_request_seconds_count', { outcome: 'error' })).toBe(1);
  } finally {
    await endpoint.close();
  }
});
