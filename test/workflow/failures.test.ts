/**
 * What a run does when work fails for good (after its retries): a task its
 * environment cannot run costs only its group, recorded with the reason; an
 * endpoint that stays down pauses the run with the reason, and a resume runs
 * the same step again; an error a user must fix fails the run with that
 * error on top. The running step's progress shows on the run's own page.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { harnessSRun } from '../../workflows';
import { resumeSignal, statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { sleep, smallRunConfig, startWorkflowTestEnv, waitFor, type WorkflowTestEnv } from './workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await startWorkflowTestEnv();
});
afterAll(async () => {
  await env?.close();
});

/** Retries spent in about a second. */
const QUICK_RETRY = { maxAttempts: 2, maxIntervalSeconds: 1 };
const start = (runId: string, overrides: Parameters<typeof smallRunConfig>[0] = {}) =>
  env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ retry: QUICK_RETRY, ...overrides }) }],
  });
const currentDetails = async (runId: string) =>
  (await env.client.workflow.getHandle(runId).query<{ currentDetails: string }>('__temporal_workflow_metadata')).currentDetails;

test('a task its environment cannot run is tried maxAttempts times, recorded as a failed group with the reason, and the steps go on', async () => {
  const runId = 'poison-task';
  const poison = (taskId: string) => taskId.endsWith('-t1');
  env.fakes.fail(
    'runRolloutGroup',
    (i) => i.runId === runId && i.phase === 'train' && poison(i.taskId),
    () => new Error('table setup failed: syntax error near "FROM"'),
  );
  const summary = await (await start(runId, { steps: 2 })).result();
  expect(summary.stepsCompleted).toBe(2);

  const recorded = env.fakes.inputsOf('recordStep', runId).map((i) => i.summary);
  expect(recorded.map((s) => s.failedGroups)).toEqual(
    [0, 1].map((step) => [{ taskId: `api-s${step}-t1`, role: 'base', reason: 'table setup failed: syntax error near "FROM"' }]),
  );
  // Not retried forever: maxAttempts per step.
  expect(env.fakes.inputsOf('runRolloutGroup', runId).filter((i) => i.phase === 'train' && poison(i.taskId))).toHaveLength(
    2 * QUICK_RETRY.maxAttempts,
  );
  // The step trained on the groups that ran.
  for (const step of [0, 1]) expect(env.fakes.trainedGroups(runId, step).some((g) => poison(g.taskId))).toBe(false);
  expect(recorded.every((s) => s.tasks === 1)).toBe(true);
});

test('a policy endpoint down past its retries pauses the run with the reason, burns no step, and a resume runs that step again', async () => {
  const runId = 'policy-outage';
  const outage = env.fakes.fail(
    'runRolloutGroup',
    (i) => i.runId === runId && i.phase === 'train' && i.step === 1,
    () => ApplicationFailure.retryable('policy endpoint: Connection error.', 'PolicyUnavailable'),
  );
  const handle = await start(runId, { steps: 3 });
  const paused = await waitFor('the run to pause itself', async () => {
    const status = await handle.query(statusQuery);
    return status.paused && status;
  });
  expect(paused).toMatchObject({ step: 1, phase: 'training' });
  expect(paused.pauseReason).toBe(
    `step 1 stopped: PolicyUnavailable: policy endpoint: Connection error. Once it is back: harness-s run resume ${runId}`,
  );
  expect(await currentDetails(runId)).toContain(`paused in step 1: ${paused.pauseReason}`);
  await sleep(1000);
  expect(env.fakes.inputsOf('recordStep', runId).map((i) => i.summary.step)).toEqual([0]);
  expect((await handle.describe()).status.name).toBe('RUNNING');

  outage.stop();
  await handle.signal(resumeSignal);
  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(3);
  expect(env.fakes.inputsOf('recordStep', runId).map((i) => i.summary.step)).toEqual([0, 1, 2]);
  expect(env.fakes.inputsOf('trainStep', runId).map((i) => i.step)).toEqual([0, 1, 2]);
});

test('a trainer down past its retries pauses the run the same way', async () => {
  const runId = 'trainer-outage';
  const outage = env.fakes.fail(
    'trainStep',
    (i) => i.runId === runId && i.step === 0,
    () => ApplicationFailure.retryable('trainer http://t is unreachable (forward_backward): ECONNREFUSED', 'TrainerUnavailable'),
  );
  const handle = await start(runId, { steps: 2 });
  const paused = await waitFor('the run to pause itself', async () => {
    const status = await handle.query(statusQuery);
    return status.paused && status;
  });
  expect(paused.pauseReason).toMatch(/^step 0 stopped: TrainerUnavailable: trainer http:\/\/t is unreachable/);
  outage.stop();
  await handle.signal(resumeSignal);
  expect((await handle.result()).stepsCompleted).toBe(2);
});

test('when every group of a step fails, the environment is what fails: the run pauses', async () => {
  const runId = 'all-groups-fail';
  const broken = env.fakes.fail(
    'runRolloutGroup',
    (i) => i.runId === runId && i.phase === 'train',
    () => new Error('connect ECONNREFUSED 127.0.0.1:3306'),
  );
  const handle = await start(runId, { steps: 1 });
  const paused = await waitFor('the run to pause itself', async () => {
    const status = await handle.query(statusQuery);
    return status.paused && status;
  });
  expect(paused.pauseReason).toMatch(
    /^step 0 stopped: AllGroupsFailed: every base group of step 0 failed; the first: connect ECONNREFUSED/,
  );
  broken.stop();
  await handle.signal(resumeSignal);
  expect((await handle.result()).stepsCompleted).toBe(1);
});

test('an error a user must fix fails the run with that error on top, not "Child Workflow execution failed"', async () => {
  const runId = 'user-error-on-top';
  env.fakes.fail(
    'runRolloutGroup',
    (i) => i.runId === runId,
    () =>
      ApplicationFailure.nonRetryable(
        "policy.apiKeyEnv names $VLLM_API_KEY, which is not set in this worker's environment",
        'MissingSecretError',
      ),
  );
  const failure = await (await start(runId, { steps: 1 })).result().then(
    () => null,
    (err: unknown) => err,
  );
  expect(failure).toBeInstanceOf(WorkflowFailedError);
  const cause = (failure as WorkflowFailedError).cause as ApplicationFailure;
  expect(cause.type).toBe('MissingSecretError');
  expect(cause.message).toBe("policy.apiKeyEnv names $VLLM_API_KEY, which is not set in this worker's environment");
});

test("the running step's groups done and rescues started show on the run's own page, under a readable title", async () => {
  const runId = 'progress-on-run-page';
  const training = env.fakes.hold('trainStep', (i) => i.runId === runId && i.step === 0);
  const handle = await start(runId, { steps: 1, name: 'ui-launched', rollout: { tasksPerStep: 3, groupSize: 4 } });
  await training.reached;
  const status = await waitFor('the step progress', async () => {
    const s = await handle.query(statusQuery);
    return s.stepProgress?.phase === 'training' && s;
  });
  // The fakes' first task of a step is dead under the base harness and goes to rescue.
  expect(status.stepProgress).toEqual({ step: 0, groupsDone: 3, groups: 3, rescuesStarted: 1, failedGroups: 0, phase: 'training' });
  expect(status.inFlight).toEqual([
    { step: 0, phase: 'training', policyVersion: 'sim-policy-base', groupsDone: 3, groups: 3, rescuesStarted: 1, failedGroups: 0 },
  ]);
  const viewerLine = `steps, groups and rollouts: http://127.0.0.1:8240/runs/${runId}`;
  expect(await currentDetails(runId)).toBe(
    `Harness-S run ui-launched (sim, SIMULATED)\nstep 0/1, policy sim-policy-base: 3/3 base groups done, 1 rescues started (training)\n${viewerLine}`,
  );
  training.release();
  await handle.result();
  expect(await currentDetails(runId)).toMatch(/^Harness-S run ui-launched \(sim, SIMULATED\)\ndone: 1 steps/);
  // The run's page in the trajectory viewer, where the worker knows one (HARNESS_S_UI_URL).
  expect((await currentDetails(runId)).split('\n').at(-1)).toBe(viewerLine);
});
