/**
 * Chaos: scale-out, as on several hosts. A control worker, two rollout
 * workers and a trainer worker run as four processes (`workers/main.ts
 * --queues <q>`, each with its own identity). A run spreads its rollout
 * groups over both rollout workers; one of them is then killed for good with
 * SIGKILL mid-step, and the run finishes on the other, nothing lost or
 * doubled. Its own Temporal dev server, so no other test's workers take the
 * rollouts.
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
  type ActivityRecord,
  type ChaosStack,
  type RestartableDevServer,
} from './chaos-helpers';
import { TEST_DATABASE_URL } from './env';
import { uniqueRunId } from './stack';
import { killWorkerProcess, startWorkerProcess, stopAllWorkerProcesses, stopWorkerProcesses } from './worker-process';

const STEPS = 3;
const B = 4;
const G = 4;

let server: RestartableDevServer;
let stack: ChaosStack;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  server = await startRestartableDevServer();
  stack = await startChaosStack({ temporalAddress: server.address, databaseUrl: TEST_DATABASE_URL });
});
afterAll(async () => {
  await stopWorkerProcesses(workers);
  await stopAllWorkerProcesses();
  await stack?.close();
  await server?.stop();
});

async function startWorker(queue: string, identity: string): Promise<ChildProcess> {
  const worker = await startWorkerProcess([queue], stack.workerEnv(identity));
  workers.push(worker);
  return worker;
}

/** Rollout groups per worker identity. */
function rolloutsByIdentity(activities: ActivityRecord[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const a of activities.filter((x) => x.taskQueue === TASK_QUEUES.rollout)) counts[a.identity] = (counts[a.identity] ?? 0) + 1;
  return counts;
}

/**
 * Resolves with the step in flight once both rollout workers have completed a
 * rollout group and a step's rollouts are under way with rollout groups still
 * to run (fewer than tasksPerStep completed in it).
 */
async function waitUntilBothServedAndMidStep(runId: string, identities: string[]): Promise<number> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const activities = await stepActivities(stack.client, runId, STEPS);
    const served = rolloutsByIdentity(activities);
    const recorded = (await stack.store.steps(runId)).length;
    const { rows } = await stack.store.queryForTests(
      `SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1 AND phase = 'train' AND step = $2`,
      [runId, recorded],
    );
    if (identities.every((id) => (served[id] ?? 0) > 0) && recorded < STEPS && rows[0].n > 0 && rows[0].n < B * G) return recorded;
    if (recorded >= STEPS || Date.now() > deadline) {
      throw new Error(
        `never saw both rollout workers serve before a step in flight (served ${JSON.stringify(served)}, ${recorded} steps recorded)`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('rollouts spread over two rollout worker processes, and the run finishes when one is killed for good mid-step', async () => {
  const [control, rolloutA, rolloutB, trainer] = await Promise.all([
    startWorker('control', 'control'),
    startWorker('rollout', 'rollout-a'),
    startWorker('rollout', 'rollout-b'),
    startWorker('trainer', 'trainer'),
  ]);
  const runId = uniqueRunId('chaos-scale-out');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: STEPS, rollout: { tasksPerStep: B, groupSize: G, maxTurns: 3, concurrency: 1 } }) }],
  });

  const stepInFlight = await waitUntilBothServedAndMidStep(runId, ['rollout-a', 'rollout-b']);
  const killedAt = Date.now();
  await killWorkerProcess(rolloutA);

  const summary = await resultWhileWorkersLive(handle.result(), { control, 'rollout-b': rolloutB, trainer });
  const figures = await runFigures(stack, runId, summary.stepsCompleted);
  const activities = await stepActivities(stack.client, runId, STEPS);
  const byIdentity = rolloutsByIdentity(activities);
  // Only the last attempt of an activity is in its history: attempt > 1 after the kill is work moved off the dead worker.
  const moved = activities.filter((a) => a.attempt > 1 && a.completedAt !== null && a.completedAt > killedAt);
  const nextCompletion = firstCompletionAfter(activities, killedAt);
  const stepRecorded = await stepRecordedAt(stack.store, runId, stepInFlight);
  printFigures('scale-out', {
    outcome: 'completed',
    ...figures,
    rolloutGroupsByWorker: byIdentity,
    killedDuringStep: stepInFlight,
    movedActivities: moved.map((a) => `${a.activityType}@${a.identity}#${a.attempt}`),
    recoverToNextActivityMs: nextCompletion === null ? null : nextCompletion - killedAt,
    recoverMovedWorkMs: moved.length ? Math.max(...moved.map((a) => a.completedAt!)) - killedAt : null,
    recoverToStepRecordedMs: stepRecorded === null ? null : stepRecorded - killedAt,
  });

  expect(summary.stepsCompleted).toBe(STEPS);
  expect(byIdentity['rollout-a']).toBeGreaterThan(0);
  expect(byIdentity['rollout-b']).toBeGreaterThan(0);
  // Each queue was served by its own process: rollouts by the rollout workers only, the training step by the trainer.
  expect(Object.keys(byIdentity).sort()).toEqual(['rollout-a', 'rollout-b']);
  expect(new Set(activities.filter((a) => a.activityType === 'trainStep').map((a) => a.identity))).toEqual(new Set(['trainer']));
  expect(figures.baseRolloutsPerStep).toEqual(Array(STEPS).fill(B * G));
  expect(figures.trajectoriesStored).toBe(figures.trajectoriesExpected);
  expect(figures.optimizerSteps).toBe(figures.trainingSteps);
  expect(figures.trainingSteps).toBeGreaterThan(0);
}, 120_000);
