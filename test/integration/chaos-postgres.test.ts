/**
 * Chaos: the run store's PostgreSQL restarts. A private PostgreSQL instance
 * (never the machine's shared cluster) is shut down fast in the middle of a
 * step, every connection cut, and started again a few seconds later; the
 * activities that hit it fail and are retried, the run finishes, and every
 * trajectory and trainer step is there exactly once. The test has its own
 * Temporal dev server too, so no other test's workers (on another database)
 * take its activities.
 */
import type { ChildProcess } from 'node:child_process';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import {
  firstCompletionAfter,
  resultWhileWorkersLive,
  firstTrajectoryAfter,
  printFigures,
  runFigures,
  startChaosStack,
  startPrivatePostgres,
  startRestartableDevServer,
  stepActivities,
  stepRecordedAt,
  waitUntilMidStep,
  type ChaosStack,
  type PrivatePostgres,
  type RestartableDevServer,
} from './chaos-helpers';
import { uniqueRunId } from './stack';
import { startWorkerProcess, stopWorkerProcesses } from './worker-process';

const STEPS = 3;
const B = 4;
const G = 4;
/** How long PostgreSQL stays down: several rollouts' worth, so activities certainly hit it. */
const DOWN_MS = 3_000;

let server: RestartableDevServer;
let postgres: PrivatePostgres;
let stack: ChaosStack;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  [server, postgres] = await Promise.all([startRestartableDevServer(), startPrivatePostgres()]);
  stack = await startChaosStack({ temporalAddress: server.address, databaseUrl: postgres.url });
});
afterAll(async () => {
  await stopWorkerProcesses(workers);
  await stack?.close();
  await Promise.all([server?.stop(), postgres?.stop()]);
});

test('PostgreSQL restarted mid-step: activities retry, the run finishes, every trajectory and trainer step stored exactly once', async () => {
  const worker = await startWorkerProcess(undefined, stack.workerEnv('all-queues'));
  workers.push(worker);
  const runId = uniqueRunId('chaos-postgres');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: STEPS, rollout: { tasksPerStep: B, groupSize: G, maxTurns: 3, concurrency: 1 } }) }],
  });

  await waitUntilMidStep(stack.store, runId, 1);
  const { downAt, upAt } = await postgres.restart(DOWN_MS);

  const summary = await resultWhileWorkersLive(handle.result(), { 'all-queues': worker });
  const figures = await runFigures(stack, runId, summary.stepsCompleted);
  const activities = await stepActivities(stack.client, runId, STEPS);
  const nextTrajectory = await firstTrajectoryAfter(stack.store, runId, downAt);
  const nextCompletion = firstCompletionAfter(activities, downAt);
  const step1RecordedAt = await stepRecordedAt(stack.store, runId, 1);
  const retried = activities.filter((a) => a.attempt > 1);
  printFigures('postgres-restarted', {
    outcome: 'completed',
    ...figures,
    downMs: upAt - downAt,
    recoverToNextTrajectoryMs: nextTrajectory === null ? null : nextTrajectory - downAt,
    recoverToNextActivityMs: nextCompletion === null ? null : nextCompletion - downAt,
    recoverToStepRecordedMs: step1RecordedAt === null ? null : step1RecordedAt - downAt,
    retriedActivities: retried.map((a) => `${a.activityType}#${a.attempt}`),
  });

  expect(summary.stepsCompleted).toBe(STEPS);
  // The outage was felt: some activity failed against the stopped database and was retried.
  expect(retried.length).toBeGreaterThan(0);
  expect(figures.baseRolloutsPerStep).toEqual(Array(STEPS).fill(B * G));
  expect(figures.trajectoriesStored).toBe(figures.trajectoriesExpected);
  expect(figures.optimizerSteps).toBe(figures.trainingSteps);
  expect(figures.trainingSteps).toBeGreaterThan(0);
}, 120_000);
