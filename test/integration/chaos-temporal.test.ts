/**
 * Chaos: the Temporal server itself dies. A dev server of this test's own
 * (port and SQLite file) is killed with SIGKILL in the middle of a step and
 * started again on the same port and file; the worker process rides it out,
 * the run finishes, and no trajectory or trainer step is lost or doubled.
 */
import type { ChildProcess } from 'node:child_process';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import {
  firstCompletionAfter,
  resultWhileWorkersLive,
  printFigures,
  runFigures,
  startChaosStack,
  startRestartableDevServer,
  stepActivities,
  stepRecordedAt,
  waitUntilMidStep,
  type ChaosStack,
  type RestartableDevServer,
} from './chaos-helpers';
import { TEST_DATABASE_URL } from './env';
import { uniqueRunId } from './stack';
import { startWorkerProcess, stopWorkerProcesses } from './worker-process';

const STEPS = 3;
const B = 4;
const G = 4;
/** How long Temporal stays dead: longer than a poll's reconnect backoff, short enough for CI. */
const DOWN_MS = 3_000;

let server: RestartableDevServer;
let stack: ChaosStack;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  server = await startRestartableDevServer();
  stack = await startChaosStack({ temporalAddress: server.address, databaseUrl: TEST_DATABASE_URL });
});
afterAll(async () => {
  await stopWorkerProcesses(workers);
  await stack?.close();
  await server?.stop();
});

test('the Temporal server killed with SIGKILL mid-step and restarted: the run finishes, no trajectory or trainer step lost or doubled', async () => {
  const worker = await startWorkerProcess(undefined, stack.workerEnv('all-queues'));
  workers.push(worker);
  const runId = uniqueRunId('chaos-temporal');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: STEPS, rollout: { tasksPerStep: B, groupSize: G, maxTurns: 3, concurrency: 1 } }) }],
  });

  await waitUntilMidStep(stack.store, runId, 1);
  const faultAt = Date.now();
  await server.kill();
  await new Promise((resolve) => setTimeout(resolve, DOWN_MS));
  await server.restart();
  const upAt = Date.now();

  const summary = await resultWhileWorkersLive(handle.result(), { 'all-queues': worker });
  const figures = await runFigures(stack, runId, summary.stepsCompleted);
  const activities = await stepActivities(stack.client, runId, STEPS);
  const nextCompletion = firstCompletionAfter(activities, faultAt);
  const step1RecordedAt = await stepRecordedAt(stack.store, runId, 1);
  printFigures('temporal-killed', {
    outcome: 'completed',
    ...figures,
    downMs: upAt - faultAt,
    recoverToNextActivityMs: nextCompletion === null ? null : nextCompletion - faultAt,
    recoverToStepRecordedMs: step1RecordedAt === null ? null : step1RecordedAt - faultAt,
    retriedActivities: activities.filter((a) => a.attempt > 1).length,
  });

  expect(summary.stepsCompleted).toBe(STEPS);
  expect(figures.baseRolloutsPerStep).toEqual(Array(STEPS).fill(B * G));
  expect(figures.trajectoriesStored).toBe(figures.trajectoriesExpected);
  expect(figures.optimizerSteps).toBe(figures.trainingSteps);
  expect(figures.trainingSteps).toBeGreaterThan(0);
  // Progress after the restart came from the restarted server, not from before the kill.
  expect(nextCompletion).toBeGreaterThan(upAt - 1_000);
}, 120_000);
