/**
 * What a user changes while a run goes on: pause holds it between steps,
 * showing why, and resume lets it run every step; updateConfig changes safe
 * settings from the next step and refuses the rest, the run going on.
 */
import { WorkflowUpdateFailedError, WorkflowUpdateStage } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { harnessSRun } from '../../workflows';
import { pauseSignal, resumeSignal, statusQuery, TASK_QUEUES, updateConfigUpdate } from '../../workflows/definitions';
import { sleep, smallRunConfig, startWorkflowTestEnv, waitFor, type WorkflowTestEnv } from './workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await startWorkflowTestEnv();
});
afterAll(async () => {
  await env?.close();
});

/** Long enough for a run that ignored the pause to start its next step many times over. */
const HOLD_MS = 1000;

const trainedSteps = (runId: string) => env.fakes.inputsOf('trainStep', runId).map((input) => input.step);
const sampledTrainSteps = (runId: string) =>
  env.fakes
    .inputsOf('sampleTasks', runId)
    .filter((input) => input.purpose === 'train')
    .map((input) => input.step);

describe('pause and resume', () => {
  test('a run paused while a step trains finishes that step, starts no other until resumed, then runs every step', async () => {
    const runId = 'pause-mid-run';
    const step1 = env.fakes.hold('trainStep', (input) => input.runId === runId && input.step === 1);
    const handle = await env.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 4 }) }],
    });
    await step1.reached;
    await handle.signal(pauseSignal, { reason: 'inspect step 1' });
    step1.release();

    const held = await waitFor('step 1 to finish', async () => {
      const status = await handle.query(statusQuery);
      return status.step === 2 && status;
    });
    expect(held).toMatchObject({ phase: 'training', paused: true, pauseReason: 'inspect step 1', steps: 4 });
    await sleep(HOLD_MS);
    expect(trainedSteps(runId)).toEqual([0, 1]);
    expect(sampledTrainSteps(runId)).toEqual([0, 1]);
    expect(await handle.query(statusQuery)).toMatchObject({ step: 2, paused: true });

    await handle.signal(resumeSignal);
    const summary = await handle.result();
    expect(summary.stepsCompleted).toBe(4);
    expect(trainedSteps(runId)).toEqual([0, 1, 2, 3]);
    expect(await handle.query(statusQuery)).toMatchObject({ phase: 'done', step: 4, paused: false, pauseReason: null });
  });

  test('a resumed run loads its current policy version on the inference replicas again before its next step samples', async () => {
    const runId = 'pause-republish';
    const step1 = env.fakes.hold('trainStep', (input) => input.runId === runId && input.step === 1);
    const handle = await env.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 3 }) }],
    });
    await step1.reached;
    await handle.signal(pauseSignal, { reason: 'restart the inference servers' });
    step1.release();
    const held = await waitFor('step 1 to finish', async () => {
      const status = await handle.query(statusQuery);
      return status.step === 2 && status;
    });
    expect(env.fakes.inputsOf('planRepublish', runId)).toEqual([]);

    await handle.signal(resumeSignal);
    await handle.result();
    expect(env.fakes.inputsOf('planRepublish', runId)).toEqual([{ runId, step: 1, policyVersion: held.policyVersion }]);
    const calls = env.fakes.callsOf(runId).map((c) => c.name);
    const republish = calls.indexOf('planRepublish');
    // Loaded again, then step 2 samples: the replicas that restarted while paused serve it before any rollout asks.
    expect(calls.indexOf('loadPolicyOnReplica', republish)).toBeGreaterThan(republish);
    expect(calls.indexOf('loadPolicyOnReplica', republish)).toBeLessThan(calls.indexOf('runRolloutGroup', republish));
    expect(trainedSteps(runId)).toEqual([0, 1, 2]);
  });

  test('a run started paused measures its profiles, then holds before its first step until resumed', async () => {
    const runId = 'pause-at-start';
    const handle = await env.client.workflow.signalWithStart(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 2 }) }],
      signal: pauseSignal,
      signalArgs: [{ reason: 'check the profiles first' }],
    });

    const held = await waitFor('the profiles to be measured', async () => {
      const status = await handle.query(statusQuery);
      return status.phase === 'training' && status;
    });
    expect(held).toMatchObject({ step: 0, profileVersion: 1, paused: true, pauseReason: 'check the profiles first' });
    await sleep(HOLD_MS);
    expect(env.fakes.inputsOf('saveProfiles', runId).map((input) => input.version)).toEqual([1]);
    expect(sampledTrainSteps(runId)).toEqual([]);
    expect(trainedSteps(runId)).toEqual([]);

    await handle.signal(resumeSignal);
    expect((await handle.result()).stepsCompleted).toBe(2);
    expect(trainedSteps(runId)).toEqual([0, 1]);
  });

  test('a pause without a reason says it came from a signal', async () => {
    const runId = 'pause-no-reason';
    const step0 = env.fakes.hold('trainStep', (input) => input.runId === runId && input.step === 0);
    const handle = await env.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 2 }) }],
    });
    await step0.reached;
    await handle.signal(pauseSignal);
    expect(await handle.query(statusQuery)).toMatchObject({ paused: true, pauseReason: 'paused by signal' });
    step0.release();
    await handle.signal(resumeSignal);
    expect((await handle.result()).stepsCompleted).toBe(2);
  });
});

describe('updateConfig', () => {
  /** The message a refused update failed with: the workflow's ApplicationFailure, as the CLI shows it. */
  async function refusal(update: Promise<unknown>): Promise<string> {
    const err = await update.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
    const cause = (err as WorkflowUpdateFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).type).toBe('RunConfigError');
    return (cause as ApplicationFailure).message;
  }

  test('a safe change sent while a step trains applies from the next step, stored before that step’s activities', async () => {
    const runId = 'update-in-flight';
    const step0 = env.fakes.hold('trainStep', (input) => input.runId === runId && input.step === 0);
    const handle = await env.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 2, eval: { enabled: true, every: 0, rollouts: 2 } }) }],
    });
    await step0.reached;
    const changed = await handle.executeUpdate(updateConfigUpdate, { args: [{ steps: 3, eval: { every: 1 } }] });
    expect(changed.fromStep).toBe(1);
    expect(changed.config).toMatchObject({ steps: 3, eval: { enabled: true, every: 1 }, rollout: { tasksPerStep: 2, groupSize: 4 } });
    expect((await handle.query(statusQuery)).steps).toBe(3);
    // Nothing is stored while the step that started with the old config is in flight.
    expect(env.fakes.inputsOf('updateRunConfig', runId)).toEqual([]);
    step0.release();

    const summary = await handle.result();
    expect(summary.stepsCompleted).toBe(3);
    expect(trainedSteps(runId)).toEqual([0, 1, 2]);
    // The changed eval.every: evaluated after every step, not only at the end.
    expect(summary.evaluations.map((e) => e.afterSteps)).toEqual([1, 2, 3]);
    const stored = env.fakes.inputsOf('updateRunConfig', runId);
    expect(stored.map((s) => ({ fromStep: s.fromStep, steps: s.config.steps, evalEvery: s.config.eval.every }))).toEqual([
      { fromStep: 1, steps: 3, evalEvery: 1 },
    ]);
    // Stored as soon as step 0 was recorded: before the evaluation after it and before step 1 read the config.
    const calls = env.fakes.callsOf(runId).map((c) => c.name);
    expect(calls[calls.indexOf('recordStep') + 1]).toBe('updateRunConfig');
  });

  test('a change the run cannot take is refused, naming what was wrong, and the run goes on as configured', async () => {
    const runId = 'update-refused';
    const step1 = env.fakes.hold('trainStep', (input) => input.runId === runId && input.step === 1);
    const handle = await env.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 3 }) }],
    });
    await step1.reached;
    expect(await refusal(handle.executeUpdate(updateConfigUpdate, { args: [{ rescue: { k: 1 } }] }))).toMatch(
      /cannot change during a run: rescue/,
    );
    expect(await refusal(handle.executeUpdate(updateConfigUpdate, { args: [{ rollout: { groupSize: 2 } }] }))).toMatch(
      /rollout: cannot change during a run: groupSize/,
    );
    expect(await refusal(handle.executeUpdate(updateConfigUpdate, { args: [{ steps: 1 }] }))).toMatch(
      /steps: 2 steps have run or are running; give at least 2/,
    );
    expect(await refusal(handle.executeUpdate(updateConfigUpdate, { args: [{ rollout: { concurrency: 0 } }] }))).toMatch(
      /rollout\.concurrency: /,
    );
    step1.release();

    expect((await handle.result()).stepsCompleted).toBe(3);
    expect(trainedSteps(runId)).toEqual([0, 1, 2]);
    expect(env.fakes.inputsOf('updateRunConfig', runId)).toEqual([]);
    expect((await handle.query(statusQuery)).steps).toBe(3);
  });

  test('a change sent while the run prepares waits for its config, then applies from step 0', async () => {
    const runId = 'update-early';
    const preparing = env.fakes.hold('prepareRun', (input) => input.runId === runId);
    const handle = await env.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 1 }) }],
    });
    await preparing.reached;
    const update = await handle.startUpdate(updateConfigUpdate, { args: [{ steps: 2 }], waitForStage: WorkflowUpdateStage.ACCEPTED });
    preparing.release();

    expect(await update.result()).toMatchObject({ fromStep: 0, config: { steps: 2 } });
    expect((await handle.result()).stepsCompleted).toBe(2);
    expect(env.fakes.inputsOf('updateRunConfig', runId).map((s) => [s.fromStep, s.config.steps])).toEqual([[0, 2]]);
    const calls = env.fakes.callsOf(runId);
    expect(calls.findIndex((c) => c.name === 'updateRunConfig')).toBeLessThan(calls.findIndex((c) => c.name === 'trainStep'));
  });

  test('a change sent after every step has run is refused, and the run completes', async () => {
    const runId = 'update-too-late';
    const summarizing = env.fakes.hold('summarizeRun', (input) => input.runId === runId);
    const handle = await env.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 1 }) }],
    });
    await summarizing.reached;
    expect(await refusal(handle.executeUpdate(updateConfigUpdate, { args: [{ steps: 5 }] }))).toBe(
      `run ${runId} has run all its steps; its config no longer changes`,
    );
    summarizing.release();

    expect((await handle.result()).stepsCompleted).toBe(1);
    expect(trainedSteps(runId)).toEqual([0]);
    expect(env.fakes.inputsOf('updateRunConfig', runId)).toEqual([]);
  });
});
