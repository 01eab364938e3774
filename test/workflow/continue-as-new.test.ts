/**
 * A long run continues as new when the server suggests it (here after a few
 * dozen events), and the chain still runs as one run: every step once, each
 * rolling out with the policy the step before it trained, the profiles and
 * the dead groups they probe carried from one execution to the next.
 */
import { harnessSRun } from '../../workflows';
import { pauseSignal, resumeSignal, statusQuery, TASK_QUEUES, updateConfigUpdate } from '../../workflows/definitions';
import { policyVersionAfter } from './fake-activities';
import { sleep, smallRunConfig, startWorkflowTestEnv, waitFor, type WorkflowTestEnv } from './workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await startWorkflowTestEnv({ suggestContinueAsNewAfter: 30 });
});
afterAll(async () => {
  await env?.close();
});

const BASE_POLICY = 'sim-policy-base'; // the config's default policy.model

const trainedSteps = (runId: string) => env.fakes.inputsOf('trainStep', runId).map((input) => input.step);

test('a long run continues as new and still runs every step exactly once, carrying its policy and profile versions', async () => {
  const runId = 'long-run';
  const STEPS = 6;
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: STEPS, router: { reanchorEvery: 2 } }) }],
  });
  const summary = await handle.result();

  // Each execution prepares once; every one after the first continues the run.
  const executions = env.fakes.inputsOf('prepareRun', runId).map((input) => input.continuing);
  expect(executions.length).toBeGreaterThan(1);
  expect(executions).toEqual([false, ...executions.slice(1).map(() => true)]);
  expect((await handle.describe()).runId).not.toBe(handle.firstExecutionRunId);

  expect(trainedSteps(runId)).toEqual([0, 1, 2, 3, 4, 5]);
  expect(summary).toMatchObject({ stepsCompleted: STEPS, policyVersion: policyVersionAfter(runId, STEPS - 1) });
  // Step n rolls out with the policy step n-1 trained, whichever execution ran it.
  const basePolicies = env.fakes
    .inputsOf('runRolloutGroup', runId)
    .filter((input) => input.role === 'base')
    .map((input) => [input.step, input.policyVersion]);
  expect(Object.fromEntries(basePolicies)).toEqual({
    0: BASE_POLICY,
    ...Object.fromEntries([1, 2, 3, 4, 5].map((step) => [step, policyVersionAfter(runId, step - 1)])),
  });
  // Profiles v1 at the start, re-anchored after steps 2 and 4 with the policy of the moment, each measured once.
  expect(env.fakes.inputsOf('saveProfiles', runId).map(({ version, policyVersion }) => [version, policyVersion])).toEqual([
    [1, BASE_POLICY],
    [2, policyVersionAfter(runId, 1)],
    [3, policyVersionAfter(runId, 3)],
  ]);
  // Every dead group is routed with the profiles current at its step.
  expect(env.fakes.inputsOf('chooseRescueHarnesses', runId).map((input) => [input.step, input.profileVersion])).toEqual([
    [0, 1],
    [1, 1],
    [2, 2],
    [3, 2],
    [4, 3],
    [5, 3],
  ]);
  // Each re-anchoring also probes the tasks whose groups died since the last one.
  expect(env.fakes.inputsOf('describeTasks', runId).map((input) => input.taskIds)).toEqual([
    ['sql-s0-t0', 'sql-s1-t0'],
    ['sql-s2-t0', 'sql-s3-t0'],
  ]);
  expect(await handle.query(statusQuery)).toMatchObject({ phase: 'done', step: STEPS, profileVersion: 3, profileShift: 0.1 });
});

test('a config change survives continue-as-new: stored once, and the continued executions run with it', async () => {
  const runId = 'long-run-changed';
  const step0 = env.fakes.hold('trainStep', (input) => input.runId === runId && input.step === 0);
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 3 }) }],
  });
  await step0.reached;
  expect(await handle.executeUpdate(updateConfigUpdate, { args: [{ steps: 5 }] })).toMatchObject({ fromStep: 1, config: { steps: 5 } });
  step0.release();
  const summary = await handle.result();

  expect(summary.stepsCompleted).toBe(5);
  expect(trainedSteps(runId)).toEqual([0, 1, 2, 3, 4]);
  const executions = env.fakes.inputsOf('prepareRun', runId);
  expect(executions.length).toBeGreaterThan(1);
  // The continued executions start from the changed config, so they need not store it again.
  expect(executions.slice(1).map((input) => (input.config as { steps: number }).steps)).toEqual(executions.slice(1).map(() => 5));
  expect(env.fakes.inputsOf('updateRunConfig', runId).map((input) => [input.fromStep, input.config.steps])).toEqual([[1, 5]]);
});

test('a recovered run republishes its policy once, not again at each continue-as-new', async () => {
  const runId = 'recovered-long-run';
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: smallRunConfig({ steps: 8 }),
        recover: true,
        resume: { nextStep: 1, policyVersion: 'policy-after-step-0', profileVersion: 1 },
      },
    ],
  });
  await handle.result();
  expect(env.fakes.inputsOf('prepareRun', runId).length).toBeGreaterThan(1);
  expect(env.fakes.inputsOf('planRepublish', runId)).toEqual([{ runId, step: 0, policyVersion: 'policy-after-step-0' }]);
  expect(env.fakes.inputsOf('loadPolicyOnReplica', runId).filter((i) => i.policyVersion === 'policy-after-step-0')).toHaveLength(1);
  expect(trainedSteps(runId)).toEqual([1, 2, 3, 4, 5, 6, 7]);
});

describe('with continue-as-new suggested from the first step on', () => {
  let early: WorkflowTestEnv;
  beforeAll(async () => {
    early = await startWorkflowTestEnv({ suggestContinueAsNewAfter: 10 });
  });
  afterAll(async () => {
    await early?.close();
  });

  test('a pause that arrives while the run stores a changed config to continue as new holds the continued run', async () => {
    const runId = 'paused-at-continue';
    const step0 = early.fakes.hold('trainStep', (input) => input.runId === runId && input.step === 0);
    const storing = early.fakes.hold('updateRunConfig', (input) => input.runId === runId);
    const handle = await early.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 6 }) }],
    });
    await step0.reached;
    await handle.executeUpdate(updateConfigUpdate, { args: [{ steps: 7 }] });
    step0.release();
    await storing.reached; // on the way to continue-as-new, after step 0
    await handle.signal(pauseSignal, { reason: 'hold it' });
    storing.release();

    const continuing = () => early.fakes.inputsOf('prepareRun', runId).map((input) => input.continuing);
    await waitFor('the run to continue as new', async () => continuing().length === 2);
    expect(continuing()).toEqual([false, true]);
    await sleep(1000);
    expect(early.fakes.inputsOf('trainStep', runId).map((input) => input.step)).toEqual([0]);
    expect(await handle.query(statusQuery)).toMatchObject({ step: 1, paused: true, pauseReason: 'hold it' });
    await handle.signal(resumeSignal);
    expect((await handle.result()).stepsCompleted).toBe(7);
  });
});
