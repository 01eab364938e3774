/**
 * Pipelined steps (pipeline.maxStaleness = k): step n+1's rollouts run while
 * step n trains, on the newest published policy, never more than k versions
 * behind the model that trains on them; every step trains exactly once, in
 * order; a pause drains the pipeline; a lost trainer model cancels the steps
 * in flight and restores; the run's history gets a step's progress in phases,
 * not once per group.
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { StepSummary } from '../../core/rl/step-summary';
import { harnessSRun } from '../../workflows';
import { pauseSignal, resumeSignal, statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { smallRunConfig, startWorkflowTestEnv, waitFor, type WorkflowTestEnv } from './workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await startWorkflowTestEnv({ suggestContinueAsNewAfter: 150 });
});
afterAll(async () => {
  await env?.close();
});

const trainedSteps = (runId: string) => env.fakes.inputsOf('trainStep', runId).map((input) => input.step);
const baseRolloutSteps = (runId: string) => [
  ...new Set(
    env.fakes
      .inputsOf('runRolloutGroup', runId)
      .filter((i) => i.role === 'base')
      .map((i) => i.step),
  ),
];
const samplerOf = (runId: string, step: number) =>
  env.fakes.inputsOf('runRolloutGroup', runId).find((i) => i.step === step && i.role === 'base')?.policyVersion;
const recorded = (runId: string) => env.fakes.inputsOf('recordStep', runId).map((i) => i.summary as StepSummary);

test('with k = 1, the next step samples while a step trains, on the newest published version, one version stale', async () => {
  const runId = 'pipeline-k1';
  const step2 = env.fakes.hold('trainStep', (i) => i.runId === runId && i.step === 2);
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 6, pipeline: { maxStaleness: 1 } }) }],
  });
  await step2.reached;
  // While step 2 trains, step 3 samples with the policy of step 1; step 4 would be two versions stale, so it waits.
  // Phases reach the run as signals, a moment after the step enters them: wait for both.
  const status = await waitFor('step 3 to sample while step 2 trains', async () => {
    const s = await handle.query(statusQuery);
    const phases = s.inFlight?.map((f) => `${f.step} ${f.phase}`) ?? [];
    return phases.includes('2 training') && phases.includes('3 waiting-for-trainer') && s;
  });
  expect(status.inFlight?.map((s) => [s.step, s.phase])).toEqual([
    [2, 'training'],
    [3, 'waiting-for-trainer'],
  ]);
  expect(baseRolloutSteps(runId)).toEqual([0, 1, 2, 3]);
  expect(trainedSteps(runId)).toEqual([0, 1, 2]); // step 3 waits for step 2's optimizer step
  step2.release();
  const summary = await handle.result();

  expect(summary.stepsCompleted).toBe(6);
  expect(trainedSteps(runId)).toEqual([0, 1, 2, 3, 4, 5]);
  const steps = recorded(runId);
  expect(steps.map((s) => s.step)).toEqual([0, 1, 2, 3, 4, 5]);
  // Step 0 samples the base; a later step the newest version published when it starts: one version stale at most
  // (fresh when the step before had published by then), and step 3, which sampled while step 2 trained, one.
  expect(steps[0].staleness).toBe(0);
  expect(steps.every((s) => s.staleness! <= 1)).toBe(true);
  expect(steps[3].staleness).toBe(1);
  expect(samplerOf(runId, 3)).toBe(steps[1].policyVersion);
  expect(steps[3].policyVersionBefore).toBe(steps[1].policyVersion);
  expect(steps[3].stalenessHistogram).toEqual({ 1: 8 });
  expect(summary.policyVersion).toBe(steps[5].policyVersion);
});

test('a trained step publishes only once no other step is sampling', async () => {
  const runId = 'pipeline-publish-alone';
  const step3Group = env.fakes.hold('runRolloutGroup', (i) => i.runId === runId && i.step === 3 && i.role === 'base');
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 5, pipeline: { maxStaleness: 1 } }) }],
  });
  await step3Group.reached;
  // Step 2 has trained while step 3 samples: it holds its publish until step 3's rollouts end.
  await waitFor('step 2 to wait to publish', async () =>
    (await handle.query(statusQuery)).inFlight?.find((s) => s.step === 2 && s.phase === 'waiting-to-publish'),
  );
  const published = () => env.fakes.inputsOf('loadPolicyOnReplica', runId).map((i) => i.step);
  expect(published()).toEqual([0, 1]);
  step3Group.release();
  await handle.result();
  expect(published()).toEqual([0, 1, 2, 3, 4]);
  expect(recorded(runId)[2].phaseSeconds?.waitToPublish).toBeGreaterThan(0);
});

test('a trained step publishes only after the steps before it have: versions go out in step order', async () => {
  const runId = 'pipeline-publish-in-order';
  const step2Publish = env.fakes.hold('loadPolicyOnReplica', (i) => i.runId === runId && i.step === 2);
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 5, pipeline: { maxStaleness: 1 } }) }],
  });
  await step2Publish.reached;
  // Step 3 sampled while step 2 trained, then trained itself: it waits for step 2's publish to end.
  await waitFor('step 3 to wait to publish', async () =>
    (await handle.query(statusQuery)).inFlight?.find((s) => s.step === 3 && s.phase === 'waiting-to-publish'),
  );
  const published = () => env.fakes.inputsOf('loadPolicyOnReplica', runId).map((i) => i.step);
  expect(published()).toEqual([0, 1, 2]);
  step2Publish.release();
  await handle.result();
  expect(published()).toEqual([0, 1, 2, 3, 4]);
});

test('with k = 2 two steps can wait behind a training step; the bound holds', async () => {
  const runId = 'pipeline-k2';
  const step2 = env.fakes.hold('trainStep', (i) => i.runId === runId && i.step === 2);
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 6, pipeline: { maxStaleness: 2 } }) }],
  });
  await step2.reached;
  await waitFor('steps 3 and 4 to sample', async () =>
    (await handle.query(statusQuery)).inFlight?.find((s) => s.step === 4 && s.phase === 'waiting-for-trainer'),
  );
  expect(baseRolloutSteps(runId)).toEqual([0, 1, 2, 3, 4]);
  step2.release();
  await handle.result();
  expect(trainedSteps(runId)).toEqual([0, 1, 2, 3, 4, 5]);
  expect(Math.max(...recorded(runId).map((s) => s.staleness!))).toBeLessThanOrEqual(2);
});

test('a pause drains the pipeline: the steps in flight finish, no new one starts until resumed', async () => {
  const runId = 'pipeline-pause';
  const step2 = env.fakes.hold('trainStep', (i) => i.runId === runId && i.step === 2);
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 6, pipeline: { maxStaleness: 1 } }) }],
  });
  await step2.reached;
  await waitFor('step 3 to sample', async () =>
    (await handle.query(statusQuery)).inFlight?.find((s) => s.step === 3 && s.phase === 'waiting-for-trainer'),
  );
  await handle.signal(pauseSignal, { reason: 'ops: drain' });
  step2.release();
  const drained = await waitFor('the pipeline to drain', async () => {
    const status = await handle.query(statusQuery);
    return status.step === 4 && (status.inFlight ?? []).length === 0 ? status : null;
  });
  expect(drained.paused).toBe(true);
  expect(trainedSteps(runId)).toEqual([0, 1, 2, 3]);
  expect(baseRolloutSteps(runId)).toEqual([0, 1, 2, 3]);
  await handle.signal(resumeSignal);
  await handle.result();
  expect(trainedSteps(runId)).toEqual([0, 1, 2, 3, 4, 5]);
});

test('a lost trainer model cancels the steps in flight, restores, and re-runs from the checkpoint; each step trains once after it', async () => {
  const runId = 'pipeline-restore';
  const failure = env.fakes.fail(
    'trainStep',
    (i) => i.runId === runId && i.step === 3,
    () => {
      failure.stop();
      return ApplicationFailure.nonRetryable(`trainer http://t: forward_backward failed: Model m-${runId} not loaded`, 'TrainerModelLost', {
        modelId: `m-${runId}`,
      });
    },
  );
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 6, checkpoint: { every: 2 }, pipeline: { maxStaleness: 1 } }) }],
  });
  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(6);
  // The checkpoint of step 1: steps 2.. re-run, each trained once more, in order.
  expect(trainedSteps(runId)).toEqual([0, 1, 2, 3, 2, 3, 4, 5]);
  const status = await handle.query(statusQuery);
  expect(status.restores).toEqual([expect.objectContaining({ fromStep: 1, atStep: 3 })]);
  const kept = recorded(runId).slice(-4);
  expect(kept.map((s) => s.step)).toEqual([2, 3, 4, 5]);
  // The re-run step 2 samples the restored policy.
  expect(kept[0].policyVersionBefore).toBe(`${runId}-restore-1-step-1`);
});

test('a long pipelined run continues as new with nothing in flight; every step trains once', async () => {
  const runId = 'pipeline-continues';
  const handle = await env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 16, pipeline: { maxStaleness: 1 } }) }],
  });
  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(16);
  expect(trainedSteps(runId)).toEqual([...Array(16).keys()]);
  const executions = [];
  for await (const w of env.client.workflow.list({ query: `WorkflowId = '${runId}'` })) executions.push(w.runId);
  expect(executions.length).toBeGreaterThan(1);
  // Across the new execution the bound still holds: at most one version stale.
  expect(
    recorded(runId)
      .map((s) => s.staleness!)
      .every((k) => k <= 1),
  ).toBe(true);
});

test('the pipeline drains at a re-anchoring: the profiles are re-measured after its step, and the steps after it route with them', async () => {
  const runId = 'pipeline-reanchor';
  await env.client.workflow.execute(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 6, router: { reanchorEvery: 2 }, pipeline: { maxStaleness: 1 } }) }],
  });
  // Profiles v1 at the start, then after steps 2 and 4 (not after the last).
  expect(env.fakes.inputsOf('saveProfiles', runId).map((i) => i.version)).toEqual([1, 2, 3]);
  const steps = recorded(runId);
  expect(steps.map((s) => s.profileVersion)).toEqual([1, 1, 2, 2, 3, 3]);
  // A step after a barrier starts on the policy its predecessor published: nothing to overlap with.
  expect(steps[2].staleness).toBe(0);
  expect(steps[4].staleness).toBe(0);
});

test("the run history gets a step's progress in phases, not once per group", async () => {
  const runId = 'pipeline-history';
  await env.client.workflow.execute(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig({ steps: 3, rollout: { tasksPerStep: 16, groupSize: 4 }, pipeline: { maxStaleness: 1 } }) }],
  });
  const history = await env.client.workflow.getHandle(runId).fetchHistory();
  const signals = (history.events ?? []).filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'stepProgress').length;
  // 16 groups and their rescues a step: once per group would be 16+ signals a step; phases are 5, the replicas'
  // versions after the publish 1, plus one every 5 s.
  expect(signals).toBeLessThanOrEqual(3 * 7);
  expect(signals).toBeGreaterThanOrEqual(3);
});
