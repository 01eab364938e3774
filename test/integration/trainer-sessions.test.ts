/**
 * No trainer session is tied to the host that opened it, on the SIMULATED
 * cluster: a run's model is created by one trainer worker group (W1), which
 * then stops for good while the run is paused between steps, for longer than
 * the sim trainer's session timeout. A second trainer worker group (W2), that
 * never trained the run, keeps the run's session alive from the run store, so
 * the run resumes on the same trainer model with no restore.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { NativeConnection } from '@temporalio/worker';
import { runView } from '../../cli/runs';
import { loadSimWorld } from '../../core/envs/sim/world';
import { startSimCluster, type SimCluster } from '../../sim-cluster/server';
import { createWorkers, type QueueName } from '../../workers/worker';
import { harnessSRun } from '../../workflows';
import { pauseSignal, resumeSignal, statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { silentLogger, startTestStack, uniqueRunId, type TestStack } from './stack';
import { TEST_TEMPORAL_ADDRESS } from './env';
import { sleep, waitFor } from './waiting';

/** The sim trainer's session timeout here (SkyRL's is 300 s): a session silent this long loses its models. */
const SESSION_TIMEOUT_MS = 4_000;
/** How often the workers heartbeat and read the live runs' sessions (10 s in production). */
const HEARTBEAT_SECONDS = 0.5;

let stack: TestStack;
let sim: SimCluster;
const groups: WorkerGroupHandle[] = [];

interface WorkerGroupHandle {
  stop(): Promise<void>;
}

async function startGroup(queues: QueueName[]): Promise<WorkerGroupHandle> {
  const connection = await NativeConnection.connect({ address: TEST_TEMPORAL_ADDRESS });
  const group = await createWorkers({
    connection,
    namespace: 'default',
    store: stack.store,
    logger: silentLogger,
    queues,
    sessionHeartbeatSeconds: HEARTBEAT_SECONDS,
  });
  const abort = new AbortController();
  const done = group.run(abort.signal);
  let stopped = false;
  const handle = {
    async stop() {
      if (stopped) return;
      stopped = true;
      abort.abort();
      await done;
      await connection.close();
    },
  };
  groups.push(handle);
  return handle;
}

beforeAll(async () => {
  stack = await startTestStack({ workers: false });
  sim = await startSimCluster({
    world: loadSimWorld(),
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'harness-s-sim-sessions-')),
    logger: silentLogger,
    trainerSessionTimeoutMs: SESSION_TIMEOUT_MS,
  });
});
afterAll(async () => {
  for (const group of groups) await group.stop();
  await sim?.close();
  await stack?.close();
});

async function trainerModelStatus(modelId: string): Promise<string> {
  const response = await fetch(`${sim.url}/api/v1/get_info`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model_id: modelId, type: 'get_info' }),
  });
  return ((await response.json()) as { status: string }).status;
}

test("a run whose model's trainer worker is lost keeps its model through a pause longer than the session timeout, kept alive by another trainer worker", async () => {
  const STEPS = 3;
  const runId = uniqueRunId('sessions');
  await startGroup(['control', 'rollout']);
  const w1 = await startGroup(['trainer']);
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: stack.config({
          steps: STEPS,
          policy: { baseUrl: `${sim.url}/v1` },
          trainer: { baseUrl: sim.url, pollSeconds: 0.02 },
          router: { probeTasksPerKind: 1, probeRollouts: 2, reanchorEvery: 0 },
          eval: { enabled: false },
        }),
      },
    ],
  });

  // W1 creates the run's model in its own session; then W2 joins the trainer queue.
  const created = await waitFor("the run's trainer model", async () => {
    const run = await stack.store.getRun(runId);
    return run?.trainerModelId && run.trainerSessionId ? { modelId: run.trainerModelId, sessionId: run.trainerSessionId } : null;
  });
  await startGroup(['trainer']);

  await handle.signal(pauseSignal, { reason: 'ops: trainer host maintenance' });
  await waitFor('the run to hold between steps', async () => {
    const status = await handle.query(statusQuery);
    return status.paused && status.stepProgress === null && (await stack.store.steps(runId)).length === status.step;
  });
  const pausedAt = (await handle.query(statusQuery)).step;
  expect(pausedAt).toBeLessThan(STEPS);

  // The host that created the model is lost: its session keeper stops with it.
  await w1.stop();
  await sleep(2.5 * SESSION_TIMEOUT_MS);
  expect(await trainerModelStatus(created.modelId)).toBe('loaded');

  await handle.signal(resumeSignal);
  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(STEPS);
  expect((await handle.query(statusQuery)).restores).toEqual([]);
  expect(await stack.store.restores(runId)).toEqual([]);
  expect((await runView(stack.client, runId, stack.store)).restores).toEqual([]);
  const run = (await stack.store.getRun(runId))!;
  expect(run).toMatchObject({ trainerModelId: created.modelId, trainerSessionId: created.sessionId });
  expect(run.finishedAt).toBeInstanceOf(Date);
  // Every optimizer step went to the one model (the seq_id ledger).
  const ops = (await stack.store.trainerOps(runId)).filter((o) => o.op === 'optim_step' && !o.failed);
  expect(new Set(ops.map((o) => o.modelId))).toEqual(new Set([created.modelId]));
});

test('the live runs are those not finished that did something within the window; a restore still loading adds its session', async () => {
  // A trainer nobody serves: these runs are only listed, never heartbeated here.
  const trainer = 'http://127.0.0.1:9';
  const config = (apiKeyEnv?: string) => stack.config({ trainer: { baseUrl: trainer, ...(apiKeyEnv ? { apiKeyEnv } : {}) } });
  const register = async (prefix: string, apiKeyEnv?: string) => {
    const runId = uniqueRunId(prefix);
    await stack.store.registerRun({ runId, name: prefix, env: 'sim', config: config(apiKeyEnv), incarnation: runId, takeOver: false });
    await stack.store.claimTrainerModel(runId, `model-${runId}`, `session-${runId}`);
    return runId;
  };
  const going = await register('live-going', 'TRAINER_API_KEY');
  const finished = await register('live-finished');
  const quiet = await register('live-quiet');
  const restoring = await register('live-restoring');
  await stack.store.markRunFinished(finished);
  await stack.store.queryForTests("UPDATE runs SET updated_at = now() - interval '8 days' WHERE run_id = $1", [quiet]);
  const restore = await stack.store.startRestore({
    runId: restoring,
    kind: 'checkpoint',
    atStep: 3,
    fromRunId: null,
    fromStep: 1,
    checkpointPath: null,
    lostModelId: `model-${restoring}`,
    reason: 'model gone',
  });
  await stack.store.setRestoreModel(restoring, restore.restore, `model-${restoring}-2`, `session-${restoring}-2`);

  const ours = [going, finished, quiet, restoring];
  const listed = (await stack.store.liveTrainerSessions(7 * 24 * 3600)).filter((s) => ours.includes(s.runId));
  expect(listed.map((s) => [s.runId, s.sessionId]).sort()).toEqual(
    [
      [going, `session-${going}`],
      [restoring, `session-${restoring}`],
      [restoring, `session-${restoring}-2`],
    ].sort(),
  );
  expect(listed.find((s) => s.runId === going)).toEqual({
    runId: going,
    sessionId: `session-${going}`,
    trainerBaseUrl: trainer,
    trainerApiKeyEnv: 'TRAINER_API_KEY',
  });
  expect((await stack.store.getRun(finished))!.finishedAt).toBeInstanceOf(Date);
  // Not left live for other tests' trainer workers.
  for (const runId of ours) await stack.store.markRunFinished(runId);
});
