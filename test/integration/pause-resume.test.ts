/** Pause holds a run between steps; resume lets it finish. */
import { pauseSignal, resumeSignal, statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { startTestStack, uniqueRunId, type TestStack } from './stack';
import { changeRunConfig } from '../../cli/runs';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(async () => {
  await stack?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

test('a paused run holds between steps and continues when resumed', async () => {
  const runId = uniqueRunId('pause');
  const STEPS = 4;
  const handle = await stack.client.workflow.start('harnessSRun', {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: STEPS }) }],
  });
  await waitFor('the first step', async () => (await stack.store.steps(runId)).length >= 1);
  await handle.signal(pauseSignal, { reason: 'test holds the run' });

  // The step in flight may finish; after that nothing moves.
  const held = await waitFor('the run to hold', async () => {
    const status = await handle.query(statusQuery);
    const recorded = (await stack.store.steps(runId)).length;
    return status.paused && recorded === status.step ? { status, recorded } : null;
  });
  expect(held.status.pauseReason).toBe('test holds the run');
  await sleep(3000);
  expect((await stack.store.steps(runId)).length).toBe(held.recorded);
  expect((await handle.query(statusQuery)).step).toBe(held.status.step);
  expect(held.recorded).toBeLessThan(STEPS);
  expect((await handle.describe()).status.name).toBe('RUNNING');

  await handle.signal(resumeSignal);
  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(STEPS);
  expect((await stack.store.steps(runId)).map((s) => s.step)).toEqual([0, 1, 2, 3]);
});

test('a safe config change sent to a held run applies from its next step and survives continue-as-new; an unsafe one is refused', async () => {
  const runId = uniqueRunId('update');
  const handle = await stack.client.workflow.start('harnessSRun', {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: 2 }) }],
  });
  await handle.signal(pauseSignal, { reason: 'change the config' });
  const held = await waitFor('the run to hold', async () => {
    const status = await handle.query(statusQuery);
    return status.paused && status.phase === 'training' && (await stack.store.steps(runId)).length === status.step ? status : null;
  });

  await expect(changeRunConfig(stack.client, runId, { rollout: { groupSize: 2 } })).rejects.toThrow(/rollout: cannot change during a run: groupSize/);
  const changed = await changeRunConfig(stack.client, runId, { steps: 4, eval: { every: 2 } });
  expect(changed.fromStep).toBe(held.step);
  expect(changed.config).toMatchObject({ steps: 4, eval: { every: 2 }, rollout: { groupSize: 4 } });
  expect((await handle.query(statusQuery)).steps).toBe(4);
  expect(((await stack.store.getRun(runId))!.config as { steps: number }).steps).toBe(4);

  await handle.signal(resumeSignal);
  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(4);
  // Evaluated after step 2 (every 2) and at the end, as the changed config says.
  expect((await stack.store.evaluations(runId)).map((e) => e.afterSteps)).toEqual([2, 4]);
  // The test server suggests continue-as-new after 25 events: the change was carried into the new execution.
  const description = await handle.describe();
  expect(description.runId).not.toBe(description.raw.workflowExecutionInfo?.firstRunId);
  await expect(changeRunConfig(stack.client, runId, { steps: 5 })).rejects.toThrow(/is COMPLETED; only a running run's config can change/);
});
