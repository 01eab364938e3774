/** Pause holds a run between steps; resume lets it finish. */
import { harnessSRun } from '../../workflows';
import { pauseSignal, resumeSignal, statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { startTestStack, uniqueRunId, type TestStack } from './stack';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { changeRunConfig } from '../../cli/runs';
import { Worker } from '@temporalio/worker';
import { loadSimWorld } from '../../core/envs/sim/world';
import { buildWorkflowBundle } from '../../workers/worker';
import { startSimCluster } from '../../sim-cluster/server';
import { silentLogger } from './stack';
import { sleep, waitFor as waitForWithin } from './waiting';

const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 60_000) =>
  waitForWithin(what, probe, timeoutMs);

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(async () => {
  await stack?.close();
});

test('a paused run holds between steps and continues when resumed', async () => {
  const runId = uniqueRunId('pause');
  const STEPS = 4;
  const handle = await stack.client.workflow.start(harnessSRun, {
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
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: 2 }) }],
  });
  await handle.signal(pauseSignal, { reason: 'change the config' });
  const held = await waitFor('the run to hold', async () => {
    const status = await handle.query(statusQuery);
    return status.paused && status.phase === 'training' && (await stack.store.steps(runId)).length === status.step ? status : null;
  });

  await expect(changeRunConfig(stack.client, runId, { rollout: { groupSize: 2 } })).rejects.toThrow(
    /rollout: cannot change during a run: groupSize/,
  );
  const changed = await changeRunConfig(stack.client, runId, { steps: 4, eval: { every: 2 } });
  expect(changed.fromStep).toBe(held.step);
  expect(changed.config).toMatchObject({ steps: 4, eval: { every: 2 }, rollout: { groupSize: 4 } });
  expect((await handle.query(statusQuery)).steps).toBe(4);

  await handle.signal(resumeSignal);
  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(4);
  // Evaluated after step 2 (every 2) and at the end, as the changed config says.
  expect((await stack.store.evaluations(runId)).map((e) => e.afterSteps)).toEqual([2, 4]);
  // Stored when the next step started: the run's config, and from which step it applied.
  expect(((await stack.store.getRun(runId))!.config as { steps: number }).steps).toBe(4);
  expect((await stack.store.configChanges(runId)).map((c) => c.fromStep)).toEqual([held.step]);
  // The test server suggests continue-as-new after 25 events: the change was carried into the new execution.
  const description = await handle.describe();
  expect(description.runId).not.toBe(description.raw.workflowExecutionInfo?.firstRunId);
  await expect(changeRunConfig(stack.client, runId, { steps: 5 })).rejects.toThrow(/is COMPLETED; only a running run's config can change/);
  // The execution that took the update replays without a determinism error.
  const firstRunId = description.raw.workflowExecutionInfo!.firstRunId!;
  const history = await stack.client.workflow.getHandle(runId, firstRunId).fetchHistory();
  expect(history.events!.some((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toBe(true);
  await expect(Worker.runReplayHistory({ workflowBundle: await buildWorkflowBundle() }, history, runId)).resolves.toBeUndefined();
});

test('an update sent as the run starts waits for its config, then applies', async () => {
  const runId = uniqueRunId('update-early');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: 1, eval: { enabled: false } }) }],
  });
  const changed = await changeRunConfig(stack.client, runId, { steps: 2 });
  expect(changed).toMatchObject({ fromStep: 0, config: { steps: 2 } });
  expect((await handle.result()).stepsCompleted).toBe(2);
});

test('two updates sent together while the last step is in flight both apply, from the next step', async () => {
  // A trainer that takes its time, so the step is surely in flight when the updates arrive.
  const slow = await startSimCluster({
    world: loadSimWorld(),
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'harness-s-slow-')),
    logger: silentLogger,
    trainerOpDelayMs: 1000,
  });
  try {
    const runId = uniqueRunId('update-inflight');
    const handle = await stack.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [
        {
          config: stack.config({
            steps: 1,
            policy: { baseUrl: `${slow.url}/v1` },
            trainer: { baseUrl: slow.url, pollSeconds: 0.02 },
            eval: { enabled: true, every: 0 },
          }),
        },
      ],
    });
    await waitFor('step 0 to be in flight', async () =>
      stack.client.workflow
        .getHandle(`${runId}/step-0`)
        .describe()
        .then(
          (d) => d.status.name === 'RUNNING',
          () => false,
        ),
    );
    const [longer, evalEvery] = await Promise.all([
      changeRunConfig(stack.client, runId, { steps: 2 }),
      changeRunConfig(stack.client, runId, { eval: { every: 1 } }),
    ]);
    expect([longer.fromStep, evalEvery.fromStep]).toEqual([1, 1]);
    expect((await handle.result()).stepsCompleted).toBe(2);
    // Both changes hold: two steps, and an evaluation after each of them.
    expect((await stack.store.evaluations(runId)).map((e) => e.afterSteps)).toEqual([1, 2]);
    const changes = await stack.store.configChanges(runId);
    expect(
      changes.map((c) => [
        c.fromStep,
        (c.config as { steps: number; eval: { every: number } }).steps,
        (c.config as { eval: { every: number } }).eval.every,
      ]),
    ).toEqual([[1, 2, 1]]);
  } finally {
    await slow.close();
  }
});
