/**
 * Chaos: an endpoint down for longer than its retries last, with real
 * processes (a worker process, the sim cluster's policy and trainer behind
 * proxies that go away and come back on the same port). The run pauses itself
 * with the reason in `run status` and in the Web UI's current details, burns
 * no step and does not fail; `harness-s run resume` after the endpoint is
 * back continues it, and every trajectory and optimizer step is there once.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { harnessSRun } from '../../workflows';
import { statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { startFaultProxy } from './fault-proxy';
import { startWorkerProcess, stopWorkerProcesses } from './worker-process';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const ROOT = path.resolve(__dirname, '..', '..');
const STEPS = 3;
const B = 4;
const G = 4;
/** A few seconds of retries: the test's outage lasts longer. */
const RETRY = { maxAttempts: 2, maxIntervalSeconds: 1 };

let stack: TestStack;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  stack = await startTestStack({ workers: false });
  workers.push(await startWorkerProcess());
});
afterAll(async () => {
  await stopWorkerProcesses(workers);
  await stack?.close();
});

const harnessS = (...args: string[]) =>
  promisify(execFile)(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['cli/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, TEMPORAL_ADDRESS: TEST_TEMPORAL_ADDRESS, DATABASE_URL: TEST_DATABASE_URL, LOG_LEVEL: 'warn' },
  });

async function waitUntil<T>(what: string, probe: () => Promise<T | null | false | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Runs a small run with `endpoint` in front of the policy or the trainer, takes it down after step 0, brings it back after the pause. */
async function outage(which: 'policy' | 'trainer') {
  const proxy = await startFaultProxy(stack.sim.url);
  const port = Number(new URL(proxy.url).port);
  const runId = uniqueRunId(`chaos-${which}`);
  const endpoints =
    which === 'policy' ? { policy: { baseUrl: `${proxy.url}/v1` } } : { trainer: { baseUrl: proxy.url, pollSeconds: 0.02 } };
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: stack.config({
          steps: STEPS,
          rollout: { tasksPerStep: B, groupSize: G, maxTurns: 5, concurrency: 2 },
          eval: { enabled: false },
          retry: RETRY,
          ...endpoints,
        }),
      },
    ],
  });
  await waitUntil('step 0 to be recorded', async () => (await stack.store.steps(runId)).length >= 1);
  await proxy.close();
  const down = Date.now();

  const paused = await waitUntil('the run to pause itself', async () => {
    const status = await handle.query(statusQuery);
    return status.paused && status;
  });
  const secondsToPause = (Date.now() - down) / 1000;
  const stepsBefore = (await stack.store.steps(runId)).length;
  // It stays paused and running, not failed, for as long as the endpoint is away.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const cliStatus = JSON.parse((await harnessS('run', 'status', runId, '--json')).stdout);
  const details = (await handle.query<{ currentDetails: string }>('__temporal_workflow_metadata')).currentDetails;
  expect(cliStatus).toMatchObject({ status: 'RUNNING', live: { paused: true, step: paused.step } });
  expect(cliStatus.live.pauseReason).toBe(paused.pauseReason);
  expect(details).toContain(paused.pauseReason!);
  expect((await stack.store.steps(runId)).length).toBe(stepsBefore);

  const back = await startFaultProxy(stack.sim.url, { port });
  await harnessS('run', 'resume', runId);
  const resumed = Date.now();
  await waitUntil('the next step after the resume', async () => (await stack.store.steps(runId)).length > stepsBefore);
  const secondsToRecover = (Date.now() - resumed) / 1000;
  const summary = await handle.result();
  await back.close();

  const steps = (await stack.store.steps(runId)).map((s) => s.summary);
  const expected = steps.reduce((n, s) => n + s.baseRollouts + s.rescueRollouts, 0);
  const stored = await stack.store.countTrajectories(runId);
  const trainer = await stack.store.trainerStep(runId, 0);
  const info = (await (
    await fetch(`${stack.sim.url}/api/v1/get_info`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model_id: trainer!.modelId }),
    })
  ).json()) as { optim_steps: number };
  const figures = {
    chaos: `${which} endpoint down`,
    outcome: summary.stepsCompleted === STEPS ? 'completed' : 'incomplete',
    pauseReason: paused.pauseReason,
    secondsToPause,
    secondsToRecover,
    trajectoriesStored: stored,
    trajectoriesExpected: expected,
    optimizerSteps: info.optim_steps,
    trainingSteps: steps.length,
  };
  process.stderr.write(`[chaos] ${JSON.stringify(figures)}\n`);
  return { figures, paused, steps };
}

test('the policy endpoint down past its retries: the run pauses with the reason, `run resume` once it is back finishes it, nothing lost or doubled', async () => {
  const { figures, paused, steps } = await outage('policy');
  expect(paused.pauseReason).toMatch(new RegExp(`^step \\d stopped: PolicyUnavailable: .*Once it is back: harness-s run resume`));
  expect(figures).toMatchObject({ outcome: 'completed', trainingSteps: STEPS, optimizerSteps: STEPS });
  expect(figures.trajectoriesStored).toBe(figures.trajectoriesExpected);
  for (const s of steps) expect(s.baseRollouts).toBe(B * G);
}, 180_000);

test('the trainer down past its retries: the same pause, resume and exactly-once accounting', async () => {
  const { figures, paused } = await outage('trainer');
  expect(paused.pauseReason).toMatch(/^step \d stopped: TrainerUnavailable: trainer http:\/\/127\.0\.0\.1:\d+ is unreachable/);
  expect(figures).toMatchObject({ outcome: 'completed', trainingSteps: STEPS, optimizerSteps: STEPS });
  expect(figures.trajectoriesStored).toBe(figures.trajectoriesExpected);
}, 180_000);
