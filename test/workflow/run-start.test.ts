/**
 * How a run begins: a fresh run measures its profiles first; a recovered run
 * republishes its last policy and starts where the resume point says; a
 * config a user must fix fails the run at once with its message on top.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { RunConfigInput } from '../../core/config';
import { harnessSRun } from '../../workflows';
import { statusQuery, TASK_QUEUES, type RunInput } from '../../workflows/definitions';
import { policyVersionAfter } from './fake-activities';
import { smallRunConfig, startWorkflowTestEnv, type WorkflowTestEnv } from './workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await startWorkflowTestEnv();
});
afterAll(async () => {
  await env?.close();
});

const BASE_POLICY = 'sim-policy-base'; // the config's default policy.model

const run = (runId: string, input: RunInput) =>
  env.client.workflow.start(harnessSRun, { workflowId: runId, taskQueue: TASK_QUEUES.control, args: [input] });

const trainedSteps = (runId: string) => env.fakes.inputsOf('trainStep', runId).map((input) => input.step);
const callNames = (runId: string) => env.fakes.callsOf(runId).map((c) => c.name);
/** The policy version each step's base groups rolled out with, by step. */
const basePolicyByStep = (runId: string) =>
  Object.fromEntries(
    env.fakes
      .inputsOf('runRolloutGroup', runId)
      .filter((input) => input.role === 'base')
      .map((input) => [input.step, input.policyVersion]),
  );

test('a fresh run measures profile version 1 with the base policy before its first step, and republishes nothing', async () => {
  const runId = 'fresh';
  const handle = await run(runId, { config: smallRunConfig({ steps: 2 }) });
  const summary = await handle.result();

  expect(env.fakes.inputsOf('prepareRun', runId).map((input) => input.continuing)).toEqual([false]);
  expect(env.fakes.inputsOf('saveProfiles', runId).map(({ version, policyVersion }) => ({ version, policyVersion }))).toEqual([
    { version: 1, policyVersion: BASE_POLICY },
  ]);
  expect(callNames(runId).indexOf('saveProfiles')).toBeLessThan(callNames(runId).indexOf('trainStep'));
  expect(env.fakes.inputsOf('planRepublish', runId)).toEqual([]);
  expect(trainedSteps(runId)).toEqual([0, 1]);
  expect(basePolicyByStep(runId)).toEqual({ 0: BASE_POLICY, 1: policyVersionAfter(runId, 0) });
  // Each step's hard task died under the base harness and was sent to rescue with profile version 1.
  expect(env.fakes.inputsOf('chooseRescueHarnesses', runId).map((input) => [input.step, input.group.taskId, input.profileVersion])).toEqual(
    [
      [0, 'sql-s0-t0', 1],
      [1, 'sql-s1-t0', 1],
    ],
  );
  expect(summary).toMatchObject({ stepsCompleted: 2, policyVersion: policyVersionAfter(runId, 1), deadGroups: 2, rescuedGroups: 2 });
  expect(await handle.query(statusQuery)).toMatchObject({ phase: 'done', step: 2, profileVersion: 1 });
});

test('a recovered run republishes its last step’s policy, then starts at the resume point with its policy and profiles', async () => {
  const runId = 'recovered';
  const handle = await run(runId, {
    config: smallRunConfig({ steps: 5 }),
    recover: true,
    resume: { nextStep: 3, policyVersion: 'policy-after-step-2', profileVersion: 2 },
  });
  const summary = await handle.result();

  expect(env.fakes.inputsOf('prepareRun', runId).map((input) => input.continuing)).toEqual([true]);
  expect(env.fakes.inputsOf('planRepublish', runId)).toEqual([{ runId, step: 2, policyVersion: 'policy-after-step-2' }]);
  // Republished before any rollout of the resumed step could ask the inference servers for that policy.
  expect(callNames(runId).indexOf('loadPolicyOnReplica')).toBeGreaterThan(-1);
  expect(callNames(runId).indexOf('loadPolicyOnReplica')).toBeLessThan(callNames(runId).indexOf('runRolloutGroup'));
  expect(env.fakes.inputsOf('saveProfiles', runId)).toEqual([]);
  expect(trainedSteps(runId)).toEqual([3, 4]);
  expect(basePolicyByStep(runId)).toEqual({ 3: 'policy-after-step-2', 4: policyVersionAfter(runId, 3) });
  expect(env.fakes.inputsOf('chooseRescueHarnesses', runId).map((input) => input.profileVersion)).toEqual([2, 2]);
  expect(summary.policyVersion).toBe(policyVersionAfter(runId, 4));
  expect(await handle.query(statusQuery)).toMatchObject({ phase: 'done', step: 5, profileVersion: 2 });
});

test('a recovered run that never measured its profiles measures them first and republishes nothing', async () => {
  const runId = 'recovered-before-profiles';
  await run(runId, { config: smallRunConfig({ steps: 1 }), recover: true }).then((handle) => handle.result());

  expect(env.fakes.inputsOf('prepareRun', runId).map((input) => input.continuing)).toEqual([true]);
  expect(env.fakes.inputsOf('planRepublish', runId)).toEqual([]);
  expect(env.fakes.inputsOf('saveProfiles', runId).map((input) => input.version)).toEqual([1]);
  expect(trainedSteps(runId)).toEqual([0]);
});

test('a recovered run that had done no step republishes nothing and starts at step 0 with its profiles', async () => {
  const runId = 'recovered-at-step-0';
  await run(runId, {
    config: smallRunConfig({ steps: 1 }),
    recover: true,
    resume: { nextStep: 0, policyVersion: BASE_POLICY, profileVersion: 1 },
  }).then((handle) => handle.result());

  expect(env.fakes.inputsOf('planRepublish', runId)).toEqual([]);
  expect(env.fakes.inputsOf('saveProfiles', runId)).toEqual([]);
  expect(trainedSteps(runId)).toEqual([0]);
});

test('a run continued from a resume point without recovery neither republishes nor measures profiles', async () => {
  const runId = 'continued';
  await run(runId, {
    config: smallRunConfig({ steps: 3 }),
    resume: { nextStep: 2, policyVersion: 'policy-after-step-1', profileVersion: 1, deadSinceReanchor: [] },
  }).then((handle) => handle.result());

  expect(env.fakes.inputsOf('prepareRun', runId).map((input) => input.continuing)).toEqual([true]);
  expect(env.fakes.inputsOf('planRepublish', runId)).toEqual([]);
  expect(env.fakes.inputsOf('saveProfiles', runId)).toEqual([]);
  expect(trainedSteps(runId)).toEqual([2]);
  expect(basePolicyByStep(runId)).toEqual({ 2: 'policy-after-step-1' });
});

test('a config a user must fix fails the run at once, its message on top and every bad field named', async () => {
  const runId = 'bad-config';
  const badConfig = { steps: 'many', rollout: { groupSize: 0 } } as unknown as RunConfigInput;
  const failure = await run(runId, { config: badConfig })
    .then((handle) => handle.result())
    .catch((err: unknown) => err);

  expect(failure).toBeInstanceOf(WorkflowFailedError);
  // The workflow's own failure, not an ActivityFailure wrapping it: the UI and the CLI show this message first.
  const cause = (failure as WorkflowFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  expect(cause).toMatchObject({ type: 'RunConfigError', nonRetryable: true });
  expect(cause!.message).toMatch(/^run config is invalid:/);
  expect(cause!.message).toMatch(/steps: /);
  expect(cause!.message).toMatch(/rollout\.groupSize: /);
  // Not retried, and nothing else ran.
  expect(callNames(runId)).toEqual(['prepareRun']);
});
