/**
 * A run with a `tracking` section calls trackRun after each step and
 * evaluation (without waiting) and once at its end, FINISHED or FAILED; a
 * trackRun that fails never fails the run; a run without the section never
 * calls it.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import { smallRunConfig, startWorkflowTestEnv, type WorkflowTestEnv } from './workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await startWorkflowTestEnv();
});
afterAll(async () => {
  await env?.close();
});

const start = (runId: string, overrides: Parameters<typeof smallRunConfig>[0] = {}) =>
  env.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: smallRunConfig(overrides) }],
  });
const TRACKED = { tracking: { mlflow: { experiment: 'workflow-test' } } };

test('a tracked run calls trackRun after each step and each evaluation, then once at its end as FINISHED', async () => {
  const runId = 'tracked';
  await (await start(runId, { steps: 2, eval: { enabled: true, every: 1 }, ...TRACKED })).result();
  const calls = env.fakes
    .callsOf(runId)
    .map((c) => c.name)
    .filter((name) => ['recordStep', 'recordEvaluation', 'trackRun', 'summarizeRun'].includes(name));
  expect(calls).toEqual([
    'recordStep',
    'trackRun',
    'recordEvaluation',
    'trackRun',
    'recordStep',
    'trackRun',
    'recordEvaluation',
    'trackRun',
    'summarizeRun',
    'trackRun',
  ]);
  expect(env.fakes.inputsOf('trackRun', runId)).toEqual([...Array(4).fill({ runId }), { runId, final: 'FINISHED' }]);
});

test('a run without a tracking section never calls trackRun', async () => {
  const runId = 'untracked';
  await (await start(runId, { steps: 2 })).result();
  expect(env.fakes.inputsOf('trackRun', runId)).toEqual([]);
});

test('a trackRun that fails for good does not fail the run', async () => {
  const runId = 'tracker-broken';
  env.fakes.fail(
    'trackRun',
    (i) => i.runId === runId,
    () => ApplicationFailure.nonRetryable('tracker exploded', 'Boom'),
  );
  const summary = await (await start(runId, { steps: 2, ...TRACKED })).result();
  expect(summary.stepsCompleted).toBe(2);
  expect(env.fakes.inputsOf('trackRun', runId).at(-1)).toEqual({ runId, final: 'FINISHED' });
});

test('a tracked run that fails ends its tracked run as FAILED, and fails with its own error', async () => {
  const runId = 'tracked-fails';
  env.fakes.fail(
    'trainStep',
    (i) => i.runId === runId && i.step === 1,
    () => ApplicationFailure.nonRetryable('the trainer refused the batch', 'TrainerRequestRefused'),
  );
  const handle = await start(runId, { steps: 3, ...TRACKED });
  const err = await handle.result().then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  expect(String((err as WorkflowFailedError).cause?.message)).toContain('the trainer refused the batch');
  expect(env.fakes.inputsOf('trackRun', runId)).toEqual([{ runId }, { runId, final: 'FAILED' }]);
});
