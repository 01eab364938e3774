/**
 * A worker process killed with SIGKILL in the middle of a step, then
 * restarted: the run finishes, every (step, task, harness, sample) trajectory
 * is stored exactly once, and the trainer applied exactly one update per step.
 */
import { harnessSRun } from '../../workflows';
import type { ChildProcess } from 'node:child_process';
import { TASK_QUEUES } from '../../workflows/definitions';
import { killWorkerProcess, startWorkerProcess as startWorker, stopWorkerProcesses } from './worker-process';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

let stack: TestStack;
const workers: ChildProcess[] = [];

async function startWorkerProcess(): Promise<ChildProcess> {
  const worker = await startWorker();
  workers.push(worker);
  return worker;
}

beforeAll(async () => {
  stack = await startTestStack({ workers: false });
});
afterAll(async () => {
  await stopWorkerProcesses(workers);
  await stack?.close();
});

test('a worker killed with SIGKILL mid-step, then restarted, lets the run finish with every trajectory stored exactly once', async () => {
  const STEPS = 3;
  const B = 4;
  const G = 4;
  const first = await startWorkerProcess();
  const runId = uniqueRunId('crash');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: STEPS, rollout: { tasksPerStep: B, groupSize: G, maxTurns: 5, concurrency: 1 } }) }],
  });

  // Mid-step: some of step 1's rollouts are stored, step 1 is not recorded.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { rows } = await stack.store.queryForTests(
      `SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1 AND phase = 'train' AND step = 1`,
      [runId],
    );
    const recorded = (await stack.store.steps(runId)).length;
    if (rows[0].n > 0 && recorded === 1) break;
    if (recorded > 1 || Date.now() > deadline) throw new Error('never caught the run in the middle of step 1');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await killWorkerProcess(first);
  expect((await stack.store.steps(runId)).length).toBe(1);

  await startWorkerProcess();
  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(STEPS);

  const steps = (await stack.store.steps(runId)).map((s) => s.summary);
  const expected = steps.reduce((n, s) => n + s.baseRollouts + s.rescueRollouts, 0);
  // Every planned rollout is stored (none lost with the killed worker); the primary key keeps them one each.
  expect(await stack.store.countTrajectories(runId)).toBe(expected);
  for (const s of steps) expect(s.baseRollouts).toBe(B * G);

  // The trainer applied one optimizer step per training step with datums: none doubled.
  const trainer = await stack.store.trainerStep(runId, 0);
  const info = (await (
    await fetch(`${stack.sim.url}/api/v1/get_info`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model_id: trainer!.modelId }),
    })
  ).json()) as { optim_steps: number };
  expect(info.optim_steps).toBe(steps.filter((s) => s.datums > 0).length);
}, 240_000);
