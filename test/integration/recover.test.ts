/**
 * Ops paths: a terminated run is recovered from its last completed step with
 * nothing redone; a bad config sent straight to Temporal fails the run at once
 * with every bad field named.
 */
import { harnessSRun } from '../../workflows';
import { WorkflowFailedError } from '@temporalio/client';
import { listRuns, recoverRun } from '../../cli/runs';
import { TASK_QUEUES } from '../../workflows/definitions';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(async () => {
  await stack?.close();
});

test('a run terminated mid-step is recovered from its last completed step and policy version, nothing redone', async () => {
  const runId = uniqueRunId('recover');
  const STEPS = 3;
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: STEPS }) }],
  });
  const deadline = Date.now() + 60_000;
  while ((await stack.store.steps(runId)).length < 1) {
    if (Date.now() > deadline) throw new Error('step 0 never completed');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await handle.terminate('test: the run dies');
  const before = await stack.store.steps(runId);
  const lastBefore = before.at(-1)!;

  const { resume } = await recoverRun(stack.client, stack.store, runId);
  expect(resume).toEqual({
    nextStep: lastBefore.step + 1,
    policyVersion: lastBefore.policyVersion,
    profileVersion: 1,
    lastEvaluation: null,
  });
  const summary = await stack.client.workflow.getHandle(runId).result();
  expect(summary.stepsCompleted).toBe(STEPS);

  const after = await stack.store.steps(runId);
  expect(after.map((s) => s.step)).toEqual([0, 1, 2]);
  // Steps done before the failure are kept as they were, not redone.
  for (const s of before) expect(after[s.step].completedAt).toEqual(s.completedAt);
  const expected = after.reduce((n, s) => n + s.summary.baseRollouts + s.summary.rescueRollouts, 0);
  expect(await stack.store.countTrajectories(runId)).toBe(expected);
  // One profile pass only: the recovered execution reused version 1.
  const { rows } = await stack.store.queryForTests('SELECT count(*)::int AS n FROM profiles WHERE run_id = $1', [runId]);
  expect(rows[0].n).toBe(1);

  // The run list shows the run once, as it is now: its terminated execution is history.
  const listed = await waitFor(async () => {
    const mine = (await listRuns(stack.client, 500)).filter((r) => r.runId === runId);
    return mine.length === 1 && mine[0].status === 'COMPLETED' ? mine : null;
  });
  expect(listed).toHaveLength(1);
});

test('recovering a run that completed is refused, and so is a fresh run under its id', async () => {
  const runId = uniqueRunId('done');
  await stack.client.workflow.execute(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: 1 }) }],
  });
  await expect(recoverRun(stack.client, stack.store, runId)).rejects.toThrow(/completed; nothing to recover/);
  const again = await stack.client.workflow
    .execute(harnessSRun, { workflowId: runId, taskQueue: TASK_QUEUES.control, args: [{ config: stack.config({ steps: 2 }) }] })
    .catch((err: unknown) => err);
  expect(String((again as WorkflowFailedError).cause?.message)).toMatch(/already used by another run/);
  // The first run's record is untouched.
  expect((await stack.store.steps(runId)).map((s) => s.step)).toEqual([0]);
});

test('a bad config sent straight to Temporal (UI, temporal CLI) fails the run at once, naming every bad field', async () => {
  const runId = uniqueRunId('bad');
  const started = Date.now();
  const failure = await stack.client.workflow
    // By name with untyped input, as the UI and the temporal CLI start it: the typed start refuses this config at compile time.
    .execute('harnessSRun', {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: { steps: 'many', rollout: { groupSize: 0 } } }],
    })
    .catch((err: unknown) => err);
  expect(failure).toBeInstanceOf(WorkflowFailedError);
  const message = String((failure as WorkflowFailedError).cause?.message);
  expect(message).toMatch(/steps: /);
  expect(message).toMatch(/rollout\.groupSize: /);
  expect(Date.now() - started).toBeLessThan(15_000);
  expect(await stack.store.getRun(runId)).toBeNull();
});

/** Polls `check` until it returns a value (visibility is eventually consistent). */
async function waitFor<T>(check: () => Promise<T | null>, timeoutMs = 10_000): Promise<T | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== null || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
