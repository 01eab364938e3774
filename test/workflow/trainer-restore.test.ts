/**
 * A run outlives its trainer: when the trainer answers that the run's model
 * is gone, the run restores it from its latest checkpoint (or from the base
 * when it has none), publishes the restored policy before any rollout uses
 * it, and re-runs the steps after the checkpoint; also when the loss comes
 * while the run is paused, around continue-as-new, and twice. A fork starts
 * from its parent's checkpoint.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { harnessSRun } from '../../workflows';
import { pauseSignal, resumeSignal, statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { smallRunConfig, startWorkflowTestEnv, waitFor, type WorkflowTestEnv } from './workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await startWorkflowTestEnv({ suggestContinueAsNewAfter: 60 });
});
afterAll(async () => {
  await env?.close();
});

const trainedSteps = (runId: string) => env.fakes.inputsOf('trainStep', runId).map((input) => input.step);

/** The trainer loses the model the first time `step` trains (as activities/failures.ts reports it). */
function loseModelAt(runId: string, step: number, modelId = `model-of-${runId}-${step}`) {
  const failure = env.fakes.fail(
    'trainStep',
    (input) => input.runId === runId && input.step === step,
    () => {
      failure.stop();
      return ApplicationFailure.nonRetryable(`trainer http://t: forward_backward failed: Model ${modelId} not loaded`, 'TrainerModelLost', {
        modelId,
      });
    },
  );
}

/** Calls in order, as `name step` (rollouts: base groups only). */
function timeline(runId: string): string[] {
  return env.fakes.callsOf(runId).flatMap((call) => {
    const input = call.input as { step?: number; role?: string; atStep?: number; policyVersion?: string };
    if (call.name === 'trainStep') return [`train ${input.step}`];
    if (call.name === 'restoreTrainer') return [`restore at ${input.atStep}`];
    if (call.name === 'loadPolicyOnReplica') return [`publish ${input.policyVersion}`];
    return [];
  });
}

test('a run whose trainer lost the model restores from its latest checkpoint, republishes, and re-runs the steps after it', async () => {
  const runId = 'restore-once';
  loseModelAt(runId, 3);
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 6, checkpoint: { every: 2 } }) }],
  });
  const summary = await handle.result();

  // Checkpoints after steps 1 and 3: step 3 lost the model before its own, so the run goes back to step 1's.
  expect(trainedSteps(runId)).toEqual([0, 1, 2, 3, 2, 3, 4, 5]);
  const restored = `${runId}-restore-1-step-1`;
  // The restored policy is published before the re-run step 2 rolls out with it.
  const order = timeline(runId);
  expect(order.slice(order.indexOf('restore at 3'), order.indexOf('restore at 3') + 3)).toEqual([
    'restore at 3',
    `publish ${restored}`,
    'train 2',
  ]);
  const step2Rollouts = env.fakes
    .inputsOf('runRolloutGroup', runId)
    .filter((i) => i.step === 2 && i.role === 'base')
    .map((i) => i.policyVersion);
  expect(step2Rollouts.at(-1)).toBe(restored);
  expect(env.fakes.inputsOf('loadPolicyOnReplica', runId).find((i) => i.policyVersion === restored)?.probeOf).toEqual({ runId, step: 1 });
  expect(summary.stepsCompleted).toBe(6);
  const status = await handle.query(statusQuery);
  expect(status.restores).toEqual([expect.objectContaining({ restore: 1, kind: 'checkpoint', fromStep: 1, atStep: 3 })]);
  expect(status.restores[0].reason).toMatch(/lost the run's model at step 3: .*Model model-of-restore-once-3 not loaded/);
  // The Web UI's current details keep showing it.
  const details = (await handle.query<{ currentDetails: string }>('__temporal_workflow_metadata')).currentDetails;
  expect(details).toContain(
    'restore 1 at 2026-12-04T00:00:00.000Z: trainer lost the model at step 3; restored from the checkpoint of step 1, steps 2..3 re-run',
  );
});

test('with no checkpoint yet the model starts over from the base, or the run pauses first when checkpoint.onLoss says so', async () => {
  const restart = 'restore-from-base';
  loseModelAt(restart, 1);
  await env.client.workflow.execute(harnessSRun, {
    workflowId: restart,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 3, checkpoint: { every: 0 } }) }],
  });
  expect(trainedSteps(restart)).toEqual([0, 1, 0, 1, 2]);
  const [rollout] = env.fakes
    .inputsOf('runRolloutGroup', restart)
    .filter((i) => i.step === 0 && i.role === 'base')
    .slice(-1);
  expect(rollout.policyVersion).toBe('sim-policy-base');
  expect(env.fakes.inputsOf('loadPolicyOnReplica', restart).every((i) => i.probeOf === undefined)).toBe(true);

  const paused = 'restore-pauses';
  loseModelAt(paused, 1);
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: paused,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 3, checkpoint: { every: 0, onLoss: 'pause' } }) }],
  });
  const held = await waitFor('the run to pause on the lost model', async () => {
    const status = await handle.query(statusQuery);
    return status.paused ? status : null;
  });
  expect(held.pauseReason).toMatch(/no checkpoint yet and checkpoint.onLoss is 'pause'.*harness-s run resume restore-pauses/);
  expect(trainedSteps(paused)).toEqual([0, 1]);
  await handle.signal(resumeSignal);
  expect((await handle.result()).stepsCompleted).toBe(3);
  expect(trainedSteps(paused)).toEqual([0, 1, 0, 1, 2]);
  expect((await handle.query(statusQuery)).restores).toEqual([expect.objectContaining({ kind: 'base', fromStep: null, atStep: 1 })]);
});

test('a run restores twice, each time from the newest checkpoint, also after a pause', async () => {
  const runId = 'restore-twice';
  loseModelAt(runId, 2, 'model-a');
  loseModelAt(runId, 5, 'model-b');
  const step4 = env.fakes.hold('trainStep', (i) => i.runId === runId && i.step === 4);
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 7, checkpoint: { every: 2 } }) }],
  });
  // Paused while step 4 trains; step 5 then loses the model once resumed.
  await step4.reached;
  await handle.signal(pauseSignal, { reason: 'ops: maintenance' });
  step4.release();
  await waitFor('the pause to hold before step 5', async () => (await handle.query(statusQuery)).step === 5);
  await handle.signal(resumeSignal);
  await handle.result();
  // Step 2 lost the model (checkpoint of step 1); step 5 lost the restored one (checkpoint of step 3).
  expect(trainedSteps(runId)).toEqual([0, 1, 2, 2, 3, 4, 5, 4, 5, 6]);
  const status = await handle.query(statusQuery);
  expect(status.restores.map((r) => [r.restore, r.fromStep, r.atStep])).toEqual([
    [1, 1, 2],
    [2, 3, 5],
  ]);
});

test('the model lost while the run is paused: the restore happens and the run holds until resumed', async () => {
  const runId = 'restore-while-paused';
  const step2 = env.fakes.hold('trainStep', (i) => i.runId === runId && i.step === 2);
  loseModelAt(runId, 2);
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 4, checkpoint: { every: 1 } }) }],
  });
  await step2.reached;
  await handle.signal(pauseSignal, { reason: 'ops: hold' });
  step2.release();
  const held = await waitFor('the restore to land while paused', async () => {
    const status = await handle.query(statusQuery);
    return status.restores.length === 1 ? status : null;
  });
  expect(held).toMatchObject({ paused: true, step: 2, pauseReason: 'ops: hold' });
  expect(trainedSteps(runId)).toEqual([0, 1, 2]);
  await handle.signal(resumeSignal);
  await handle.result();
  expect(trainedSteps(runId)).toEqual([0, 1, 2, 2, 3]);
});

test('a restore survives continue-as-new: the continued executions show it and restore again if needed', async () => {
  const runId = 'restore-across-continue-as-new';
  loseModelAt(runId, 2, 'model-1');
  loseModelAt(runId, 7, 'model-2');
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 9, checkpoint: { every: 3 } }) }],
  });
  const summary = await handle.result();
  expect(env.fakes.inputsOf('prepareRun', runId).length).toBeGreaterThan(1); // it did continue as new
  expect(summary.stepsCompleted).toBe(9);
  const status = await handle.query(statusQuery);
  expect(status.restores.map((r) => [r.kind, r.fromStep, r.atStep])).toEqual([
    ['base', null, 2],
    ['checkpoint', 5, 7],
  ]);
  expect(trainedSteps(runId)).toEqual([0, 1, 2, 0, 1, 2, 3, 4, 5, 6, 7, 6, 7, 8]);
});

test('a fork loads its parent checkpoint and publishes it, checked by the parent step probe, before its first step', async () => {
  const parent = 'fork-parent';
  await env.client.workflow.execute(harnessSRun, {
    workflowId: parent,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 4, checkpoint: { every: 2 } }) }],
  });
  const fork = 'fork-child';
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: fork,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: smallRunConfig({ steps: 4, checkpoint: { every: 2 } }),
        resume: { nextStep: 2, policyVersion: `${parent}-step-1`, profileVersion: 1 },
        fork: { runId: parent, step: 1 },
      },
    ],
  });
  await handle.result();
  expect(env.fakes.inputsOf('restoreTrainer', fork)).toEqual([
    expect.objectContaining({ fork: { parentRunId: parent, atOrBeforeStep: 1 }, allowBase: false }),
  ]);
  const loaded = `${fork}-restore-0-step-1`;
  expect(env.fakes.inputsOf('loadPolicyOnReplica', fork)[0]).toMatchObject({ policyVersion: loaded, probeOf: { runId: parent, step: 1 } });
  expect(trainedSteps(fork)).toEqual([2, 3]);
  expect(env.fakes.inputsOf('runRolloutGroup', fork).find((i) => i.step === 2 && i.role === 'base')?.policyVersion).toBe(loaded);
  expect(await handle.query(statusQuery)).toMatchObject({ parent: { runId: parent, step: 1 }, restores: [] });
});
