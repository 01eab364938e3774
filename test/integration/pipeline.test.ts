/**
 * Pipelined steps on the real stack (Temporal dev server, PostgreSQL, the
 * SIMULATED cluster with a trainer that takes time per op): step n+1's
 * rollouts are stored while step n trains; each trajectory keeps the version
 * that sampled it; the trainer applies exactly one optimizer step per step,
 * also when a worker process is killed with SIGKILL mid-pipeline.
 */
import type { ChildProcess } from 'node:child_process';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type DevServer, startDevServer } from '../../infra/temporal-dev-server';
import { freePort } from './chaos-helpers';
import { killWorkerProcess, startWorkerProcess as startWorker, stopWorkerProcesses } from './worker-process';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

let stack: TestStack;
let server: DevServer;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  // A dev server of its own with Temporal's default history limits: the suite's server suggests continue-as-new
  // after 25 events, and a pipeline drains before continuing as new, so there every step would run alone.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-pipeline-'));
  const port = await freePort();
  server = await startDevServer({
    address: `127.0.0.1:${port}`,
    dbFile: path.join(dir, 'temporal.sqlite'),
    logFile: path.join(dir, 'temporal.log'),
  });
  // 100 ms per trainer op: training takes long enough for the next step's rollouts to overlap it.
  stack = await startTestStack({ workers: false, trainerOpDelayMs: 100, temporalAddress: server.address });
});
afterAll(async () => {
  await stopWorkerProcesses(workers);
  await stack?.close();
  await server?.stop();
});

async function startWorkerProcess(): Promise<ChildProcess> {
  const worker = await startWorker(undefined, { TEMPORAL_ADDRESS: server.address });
  workers.push(worker);
  return worker;
}

async function optimSteps(runId: string): Promise<number> {
  const trainer = await stack.store.trainerStep(runId, 0);
  const info = (await (
    await fetch(`${stack.sim.url}/api/v1/get_info`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model_id: trainer!.modelId }),
    })
  ).json()) as { optim_steps: number };
  return info.optim_steps;
}

/** When each step's first trajectory was stored and when the step was recorded. */
async function stepTimes(runId: string): Promise<Array<{ step: number; firstRollout: Date; recorded: Date }>> {
  const { rows } = await stack.store.queryForTests(
    `SELECT t.step, min(t.created_at) AS first_rollout, s.completed_at AS recorded
       FROM trajectories t JOIN steps s ON s.run_id = t.run_id AND s.step = t.step AND s.superseded_by IS NULL
      WHERE t.run_id = $1 AND t.phase = 'train' AND t.superseded_by IS NULL GROUP BY t.step, s.completed_at ORDER BY t.step`,
    [runId],
  );
  return rows.map((r) => ({ step: r.step, firstRollout: r.first_rollout, recorded: r.recorded }));
}

test('a worker killed mid-pipeline, then restarted: the pipelined run finishes, every trajectory once, one optimizer step per step', async () => {
  const STEPS = 5;
  const B = 4;
  const G = 4;
  const first = await startWorkerProcess();
  const runId = uniqueRunId('pipeline-crash');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: stack.config({
          steps: STEPS,
          rollout: { tasksPerStep: B, groupSize: G, maxTurns: 5, concurrency: 2 },
          pipeline: { maxStaleness: 1 },
        }),
      },
    ],
  });

  // Mid-pipeline: a step has rollouts stored while the step before it is not recorded yet.
  const deadline = Date.now() + 90_000;
  for (;;) {
    const { rows } = await stack.store.queryForTests(
      `SELECT max(step)::int AS step FROM trajectories WHERE run_id = $1 AND phase = 'train'`,
      [runId],
    );
    const recorded = (await stack.store.steps(runId)).length;
    if (rows[0].step !== null && rows[0].step >= 1 && rows[0].step > recorded) break;
    if (recorded >= STEPS - 1 || Date.now() > deadline) throw new Error('never caught the run with two steps in flight');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await killWorkerProcess(first);
  await startWorkerProcess();
  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(STEPS);

  const steps = (await stack.store.steps(runId)).map((s) => s.summary);
  expect(steps.map((s) => s.step)).toEqual([0, 1, 2, 3, 4]);
  expect(await stack.store.countTrajectories(runId)).toBe(steps.reduce((n, s) => n + s.baseRollouts + s.rescueRollouts, 0));
  for (const s of steps) expect(s.baseRollouts).toBe(B * G);
  // One optimizer step per training step: none doubled by the kill, none skipped by the overlap.
  expect(await optimSteps(runId)).toBe(steps.filter((s) => s.datums > 0).length);
  // The bound: no step trained samples more than one version old; each trajectory keeps the version that sampled it.
  expect(steps.every((s) => s.staleness !== undefined && s.staleness <= 1)).toBe(true);
  const { rows } = await stack.store.queryForTests(
    `SELECT step, array_agg(DISTINCT policy_version) AS versions FROM trajectories WHERE run_id = $1 AND phase = 'train' GROUP BY step ORDER BY step`,
    [runId],
  );
  expect(rows.map((r) => r.versions)).toEqual(steps.map((s) => [s.policyVersionBefore]));
}, 240_000);

test('the next step samples while a step trains: its first rollout is stored before the step before it is recorded', async () => {
  await startWorkerProcess();
  const runId = uniqueRunId('pipeline-overlap');
  const summary = await stack.client.workflow.execute(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: 4, pipeline: { maxStaleness: 1 } }) }],
  });
  expect(summary.stepsCompleted).toBe(4);
  const times = await stepTimes(runId);
  const overlapped = times.slice(1).filter((t, i) => t.firstRollout < times[i].recorded);
  expect(overlapped.length).toBeGreaterThan(0);
  expect(await optimSteps(runId)).toBe(4);
  expect(Object.keys(summary.mismatchByStaleness).sort()).toEqual(expect.arrayContaining(['0']));
}, 180_000);
