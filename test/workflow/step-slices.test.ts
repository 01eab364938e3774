/**
 * A step at cluster scale: a step with more base rollouts than a slice holds
 * plays its tasks in child workflows (`<step>/slice-<i>`), and the trainer
 * takes every step's batch by reference (written to the run store in chunks,
 * read back and checked). The fakes' first task of every step (`-t0`) is hard:
 * every base rollout fails and the siblings rescue it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { WorkflowNotFoundError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import type { RunConfigInput } from '../../core/config';
import type { StepSummary } from '../../core/rl/step-summary';
import { harnessSRun } from '../../workflows';
import { resumeSignal, statusQuery, TASK_QUEUES, type StepSliceResult } from '../../workflows/definitions';
import { BASE_HARNESS, SIBLINGS } from './fake-activities';
import { smallRunConfig, startWorkflowTestEnv, waitFor, type WorkflowTestEnv } from './workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await startWorkflowTestEnv();
});
afterAll(async () => {
  await env?.close();
});

/** 5 tasks x G=4 in slices of 8 rollouts: slices of 2, 2 and 1 tasks. */
const splitConfig = (overrides: Partial<RunConfigInput> = {}) =>
  smallRunConfig({
    steps: 1,
    rollout: { tasksPerStep: 5, groupSize: 4, rolloutsPerSlice: 8 },
    retry: { maxAttempts: 2, maxIntervalSeconds: 1 },
    ...overrides,
  });
const start = (runId: string, config: RunConfigInput) =>
  env.client.workflow.start(harnessSRun, { workflowId: runId, taskQueue: TASK_QUEUES.control, args: [{ config }] });
const stepTasks = (step: number, count: number) => Array.from({ length: count }, (_, i) => `${['sql', 'api'][i % 2]}-s${step}-t${i}`);

/** The slices a step started, by looking each id up in turn until one is not there. */
async function slicesOf(stepWorkflowId: string): Promise<Array<{ id: string; status: string }>> {
  const found: Array<{ id: string; status: string }> = [];
  for (let i = 0; ; i++) {
    const id = `${stepWorkflowId}/slice-${i}`;
    try {
      found.push({ id, status: (await env.client.workflow.getHandle(id).describe()).status.name });
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return found;
      throw err;
    }
  }
}
const recorded = (runId: string) => env.fakes.inputsOf('recordStep', runId).map((i) => i.summary as StepSummary);
const currentDetails = async (workflowId: string) =>
  (await env.client.workflow.getHandle(workflowId).query<{ currentDetails: string }>('__temporal_workflow_metadata')).currentDetails;

test('a step with more base rollouts than a slice holds plays its tasks in one child workflow per slice and trains on every group, in stream order', async () => {
  const runId = 'split-step';
  const summary = await (await start(runId, splitConfig())).result();
  expect(summary.stepsCompleted).toBe(1);

  expect(await slicesOf(`${runId}/step-0`)).toEqual([0, 1, 2].map((i) => ({ id: `${runId}/step-0/slice-${i}`, status: 'COMPLETED' })));
  const slice1 = await env.client.workflow.getHandle<() => Promise<StepSliceResult>>(`${runId}/step-0/slice-1`).result();
  expect(slice1.groups.map((g) => [g.index, g.base?.taskId])).toEqual([
    [2, 'sql-s0-t2'],
    [3, 'api-s0-t3'],
  ]);

  // Each task's base group ran once; the hard one was rescued by two siblings.
  const groups = env.fakes.inputsOf('runRolloutGroup', runId).filter((i) => i.phase === 'train' && i.step === 0);
  expect(
    groups
      .filter((g) => g.role === 'base')
      .map((g) => g.taskId)
      .sort(),
  ).toEqual(stepTasks(0, 5).sort());
  expect(groups.filter((g) => g.role === 'rescue').map((g) => g.taskId)).toEqual(['sql-s0-t0']);

  const trained = env.fakes.trainedGroups(runId, 0);
  expect(trained.map((g) => g.taskId)).toEqual(stepTasks(0, 5));
  expect(trained.map((g) => g.rollouts.length)).toEqual([4, 4, 4, 4, 4]);
  expect(new Set(trained[0].rollouts.map((r) => r.harnessId))).toEqual(new Set(SIBLINGS.slice(0, 2)));
  expect(trained.slice(1).every((g) => g.rollouts.every((r) => r.harnessId === BASE_HARNESS))).toBe(true);
  expect(recorded(runId)[0]).toMatchObject({ tasks: 5, deadGroups: 1, rescuedGroups: 1, failedGroups: [], spend: { rollouts: 24 } });
});

test('trainStep takes the batch by reference: the step writes it under its workflow id and the trainer reads exactly that', async () => {
  const runId = 'batch-by-reference';
  await (await start(runId, smallRunConfig({ steps: 1 }))).result();
  // 2 tasks x G=4 fit one history: no slice.
  expect(await slicesOf(`${runId}/step-0`)).toEqual([]);
  const chunks = env.fakes.inputsOf('storeTrainingBatch', runId);
  expect(chunks.map((c) => [c.batchKey, c.step, c.first, c.groups.map((g) => g.taskId)])).toEqual([
    [`${runId}/step-0`, 0, 0, ['sql-s0-t0', 'api-s0-t1']],
  ]);
  expect(env.fakes.inputsOf('trainStep', runId)).toEqual([{ runId, step: 0, batch: { key: `${runId}/step-0`, groups: 2, rollouts: 8 } }]);
  expect(env.fakes.trainedGroups(runId, 0)).toEqual(
    chunks[0].groups.map((g) => ({ taskId: g.taskId, role: g.role, rollouts: g.rollouts })),
  );
});

test('a batch of more than 2,048 rollouts is written in chunks of at most that many, and the trainer gets it whole', async () => {
  const runId = 'batch-in-chunks';
  // 300 tasks x G=8: slices of the default 512 rollouts (64 tasks), and two chunks.
  await (await start(runId, smallRunConfig({ steps: 1, rollout: { tasksPerStep: 300, groupSize: 8 } }))).result();
  expect((await slicesOf(`${runId}/step-0`)).map((s) => s.status)).toEqual(Array(5).fill('COMPLETED'));
  const chunks = env.fakes.inputsOf('storeTrainingBatch', runId);
  expect(chunks.map((c) => [c.first, c.groups.length, c.groups.reduce((n, g) => n + g.rollouts.length, 0)])).toEqual([
    [0, 256, 2048],
    [256, 44, 352],
  ]);
  expect(env.fakes.inputsOf('trainStep', runId).map((i) => ('batch' in i ? i.batch : null))).toEqual([
    { key: `${runId}/step-0`, groups: 300, rollouts: 2400 },
  ]);
  expect(env.fakes.trainedGroups(runId, 0).map((g) => g.taskId)).toEqual(stepTasks(0, 300));
});

test("the run shows a split step's groups done as its slices report them, and all of them once it trains", async () => {
  const runId = 'split-progress';
  const held = env.fakes.hold('runRolloutGroup', (i) => i.runId === runId && i.taskId === 'api-s0-t1' && i.role === 'base');
  const training = env.fakes.hold('trainStep', (i) => i.runId === runId);
  const handle = await start(runId, splitConfig());
  await held.reached;
  // Slice 0 reported its first task done; slices 1 and 2 have ended.
  await waitFor(
    "the step to count the slices' groups",
    async () => (await currentDetails(`${runId}/step-0`)) === 'step 0: 4/5 base groups done, 0 rescues started',
  );
  held.release();
  await training.reached;
  const status = await waitFor('the run to show the step training', async () => {
    const s = await handle.query(statusQuery);
    return s.stepProgress?.phase === 'training' && s;
  });
  expect(status.stepProgress).toEqual({ step: 0, groupsDone: 5, groups: 5, rescuesStarted: 1, failedGroups: 0, phase: 'training' });
  training.release();
  await handle.result();
});

test('a group that fails for good in a slice is recorded with its reason and left out of the batch', async () => {
  const runId = 'split-failed-group';
  env.fakes.fail(
    'runRolloutGroup',
    (i) => i.runId === runId && i.taskId === 'api-s0-t3',
    () => new Error('table setup failed'),
  );
  await (await start(runId, splitConfig())).result();
  expect(recorded(runId)[0].failedGroups).toEqual([{ taskId: 'api-s0-t3', role: 'base', reason: 'table setup failed' }]);
  expect(env.fakes.trainedGroups(runId, 0).map((g) => g.taskId)).toEqual(['sql-s0-t0', 'api-s0-t1', 'sql-s0-t2', 'sql-s0-t4']);
});

test('an outage in a slice pauses the run with the reason, and a resume runs the step again, its slices anew', async () => {
  const runId = 'split-outage';
  const outage = env.fakes.fail(
    'runRolloutGroup',
    (i) => i.runId === runId && i.taskId === 'sql-s0-t4',
    () => ApplicationFailure.retryable('policy endpoint: Connection error.', 'PolicyUnavailable'),
  );
  const handle = await start(runId, splitConfig());
  const paused = await waitFor('the run to pause itself', async () => {
    const status = await handle.query(statusQuery);
    return status.paused && status;
  });
  expect(paused.pauseReason).toBe(
    `step 0 stopped: PolicyUnavailable: policy endpoint: Connection error. Once it is back: harness-s run resume ${runId}`,
  );
  outage.stop();
  await handle.signal(resumeSignal);
  expect((await handle.result()).stepsCompleted).toBe(1);
  expect(env.fakes.trainedGroups(runId, 0).map((g) => g.taskId)).toEqual(stepTasks(0, 5));
  expect(env.fakes.inputsOf('trainStep', runId)).toHaveLength(1);
});

test('with a refill the step is never split: it draws fresh tasks in stream order in one history', async () => {
  const runId = 'refill-unsplit';
  await (await start(runId, splitConfig({ rescue: { enabled: false }, sampling: { refill: 'dynamic' } }))).result();
  expect(await slicesOf(`${runId}/step-0`)).toEqual([]);
  // The hard task's group has no signal: dropped, and the stream's next task drawn in its place.
  expect(env.fakes.trainedGroups(runId, 0).map((g) => g.taskId)).toEqual(['api-s0-t1', 'sql-s0-t2', 'api-s0-t3', 'sql-s0-t4', 'api-s0-t5']);
});

/**
 * A step recorded before slices and batches by reference (130 tasks x G=8, more than a slice holds now, with
 * trainStep given every rollout in its input) replays on the current code: patches `step-slices` and
 * `train-batch-by-reference` keep its path. Recorded with the code of commit 7477807 and these fakes.
 */
test('a step recorded before slices and batches by reference replays on the current workflow code', async () => {
  const recordedHistory = temporal.api.history.v1.History.decode(
    readFileSync(path.join(__dirname, 'fixtures', 'trainingStep-before-slices.pb')),
  );
  await expect(
    Worker.runReplayHistory({ workflowsPath: require.resolve('../../workflows') }, recordedHistory, 'before-slices/step-0'),
  ).resolves.toBeUndefined();
});
