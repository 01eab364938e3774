/**
 * Experiment tracking in MLflow, against a real tracking server: `mlflow
 * server` from the venv `harness-s mlflow setup` installs (PostgreSQL backend
 * in a database of its own, made anew; artifacts in a temp folder). A
 * SIMULATED run with `tracking.mlflow` goes through the real Temporal stack,
 * and what it logged is read back through MLflow's REST API.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { Worker } from '@temporalio/worker';
import { createActivities } from '../../activities';
import { loadRunReport, runReportPage } from '../../core/report/run-report';
import { createEnvironment } from '../../core/envs/registry';
import { TrainerSessions } from '../../core/trainer/tinker/sessions';
import { MlflowClient, type MlflowMetric } from '../../core/tracking/mlflow/client';
import { mlflowTrackerFor, RUN_ID_TAG } from '../../core/tracking/mlflow/registration';
import { mlflowInstall } from '../../infra/mlflow/install';
import { type MlflowServer, startMlflowServer } from '../../infra/mlflow/server';
import { buildWorkflowBundle } from '../../workers/worker';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import { TEST_DATABASE_URL } from './env';
import { silentLogger, startTestStack, type TestStack, uniqueRunId } from './stack';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..', '..');
/** The MLflow backend: a database beside the test database, dropped and made anew by this file. */
const MLFLOW_DATABASE = `${new URL(TEST_DATABASE_URL).pathname.slice(1)}_mlflow`;

let server: MlflowServer;
let mlflow: MlflowClient;
let stack: TestStack;

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function recreateDatabase(name: string): Promise<string> {
  const admin = new URL(TEST_DATABASE_URL);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

beforeAll(async () => {
  if (!mlflowInstall())
    throw new Error('MLflow is not installed here: run `harness-s mlflow setup` (npx tsx cli/main.ts mlflow setup) before this test');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-mlflow-'));
  server = await startMlflowServer({
    port: await freePort(),
    backendStoreUri: await recreateDatabase(MLFLOW_DATABASE),
    artifactsDir: path.join(dir, 'artifacts'),
    logFile: path.join(dir, 'mlflow.log'),
  });
  mlflow = new MlflowClient({ trackingUri: server.url });
  stack = await startTestStack({ trackingEndpoints: { mlflow: server.url } });
}, 240_000);

afterAll(async () => {
  await stack?.close();
  await server?.stop();
}, 60_000);

/** The activities as a worker with these tracker endpoints builds them, to call trackRun directly (as a retry would). */
function activitiesWith(trackingEndpoints: Record<string, string>) {
  return createActivities({
    store: stack.store,
    logger: silentLogger,
    environmentFor: (c) => createEnvironment(c.env),
    trainerSessions: new TrainerSessions(silentLogger),
    trackingEndpoints,
    runReport: async (runId) => runReportPage(await loadRunReport(stack.store, runId)),
  });
}

async function runToEnd(runId: string, steps: number): Promise<void> {
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: stack.config({
          steps,
          eval: { every: 1, tasksPerKind: 1, rollouts: 2 },
          tracking: { mlflow: { experiment: `harness-s-it-${runId}` } },
        }),
      },
    ],
  });
  await handle.result();
}

const byStep = (history: MlflowMetric[]) => [...history].sort((a, b) => a.step - b.step || a.timestamp - b.timestamp);

/** Everything the run store holds of the run is in its MLflow run: each step once, each evaluation once, the report, FINISHED. */
async function expectFullyLogged(runId: string): Promise<string> {
  const exported = (await stack.store.tracking.find(runId, 'mlflow'))!;
  expect(exported).toMatchObject({ paramsLogged: true, reportLogged: true, endedAs: 'FINISHED', lastError: null });
  const externalRunId = exported.externalRunId!;
  const run = await mlflow.getRun(externalRunId);
  expect(run.info.status).toBe('FINISHED');
  expect(run.data.tags).toContainEqual({ key: RUN_ID_TAG, value: runId });
  const params = Object.fromEntries(run.data.params.map((p) => [p.key, p.value]));
  expect(params).toMatchObject({
    steps: '2',
    'rollout.groupSize': '4',
    'env.kind': 'sim',
    'tracking.mlflow.experiment': `harness-s-it-${runId}`,
    'harness_s.run_id': runId,
  });

  const steps = await stack.store.steps(runId);
  expect(steps).toHaveLength(2);
  const success = byStep(await mlflow.metricHistory(externalRunId, 'base_success'));
  expect(success).toEqual(
    steps.map((s) => ({ key: 'base_success', step: s.step, value: s.summary.baseSuccessRate, timestamp: s.completedAt.getTime() })),
  );
  expect(byStep(await mlflow.metricHistory(externalRunId, 'live_share')).map((m) => m.value)).toEqual(
    steps.map((s) => s.summary.liveGroupFraction),
  );
  expect(byStep(await mlflow.metricHistory(externalRunId, 'trainer/grad_norm')).map((m) => m.value)).toEqual(
    steps.map((s) => s.summary.trainerMetrics.grad_norm),
  );
  expect(await mlflow.metricHistory(externalRunId, 'seconds/rollout')).toHaveLength(2);

  const evaluations = await stack.store.evaluations(runId);
  expect(evaluations.map((e) => e.afterSteps)).toEqual([1, 2]);
  const evalBase = byStep(await mlflow.metricHistory(externalRunId, 'eval/base_success'));
  expect(evalBase.map((m) => [m.step, m.value])).toEqual(evaluations.map((e) => [e.afterSteps, e.base.successRate]));
  const evalRank1 = byStep(await mlflow.metricHistory(externalRunId, 'eval/rank1_success'));
  expect(evalRank1.map((m) => [m.step, m.value])).toEqual(evaluations.map((e) => [e.afterSteps, e.rank1.successRate]));

  expect((await mlflow.listArtifacts(externalRunId)).map((f) => f.path)).toEqual(['report.html']);
  const report = await mlflow.downloadArtifact(run, 'report.html');
  expect(report).toMatch(/^<!doctype html>/i);
  expect(report).toContain(`Harness-S run ${runId}`);
  return externalRunId;
}

test('a run with tracking.mlflow logs its config, every step, its evaluations and its report to MLflow', async () => {
  const runId = uniqueRunId('mlflow');
  await runToEnd(runId, 2);
  await expectFullyLogged(runId);
});

test('the history of a run with tracking.mlflow, its trackRun calls included, replays without a determinism error', async () => {
  const runId = uniqueRunId('mlflow-replay');
  await runToEnd(runId, 2);
  const history = await stack.client.workflow.getHandle(runId).fetchHistory();
  const scheduled = (history.events ?? []).flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
  expect(scheduled).toContain('trackRun');
  await expect(Worker.runReplayHistory({ workflowBundle: await buildWorkflowBundle() }, history, runId)).resolves.toBeUndefined();
});

test('trackRun called again (a retry, or one that crashed half way) logs no point twice and makes no second MLflow run', async () => {
  const runId = uniqueRunId('mlflow-retry');
  await runToEnd(runId, 2);
  const externalRunId = await expectFullyLogged(runId);
  const activities = activitiesWith({ mlflow: server.url });

  await activities.trackRun({ runId, final: 'FINISHED' });
  // A call that logged everything but crashed before storing its progress, or before storing the MLflow run's id.
  await stack.store.queryForTests(
    `UPDATE tracking_exports SET external_run_id = NULL, experiment_id = NULL, params_logged = false, logged_steps = '{}', logged_evaluations = '{}',
       report_logged = false, ended_as = NULL
     WHERE run_id = $1`,
    [runId],
  );
  const again = await activities.trackRun({ runId, final: 'FINISHED' });
  expect(again.trackers).toEqual([{ tracker: 'mlflow', ok: true, stepsLogged: 2, evaluationsLogged: 2 }]);

  expect((await stack.store.tracking.find(runId, 'mlflow'))!.externalRunId).toBe(externalRunId);
  const experiment = (await mlflow.experimentByName(`harness-s-it-${runId}`))!;
  expect(await mlflow.searchRuns([experiment.experimentId], `tags.\`${RUN_ID_TAG}\` = '${runId}'`)).toHaveLength(1);
  expect(await mlflow.metricHistory(externalRunId, 'base_success')).toHaveLength(2);
  expect(await mlflow.metricHistory(externalRunId, 'eval/base_success')).toHaveLength(2);
  await expectFullyLogged(runId);
});

test('with MLflow down the run completes as usual, the error is recorded, and `harness-s mlflow sync RUN --end FINISHED` catches up everything once it is back', async () => {
  const closedPort = await freePort();
  await stack.stopWorkers();
  await stack.startWorkers({ trackingEndpoints: { mlflow: `http://127.0.0.1:${closedPort}` } });
  const runId = uniqueRunId('mlflow-down');
  try {
    await runToEnd(runId, 2);
  } finally {
    await stack.stopWorkers();
    await stack.startWorkers();
  }
  expect(await stack.store.steps(runId)).toHaveLength(2);
  const down = (await stack.store.tracking.find(runId, 'mlflow'))!;
  expect(down).toMatchObject({ externalRunId: null, paramsLogged: false, loggedSteps: {}, endedAs: null });
  expect(down.lastError).toContain(`MLflow at http://127.0.0.1:${closedPort}/api/2.0/mlflow/experiments/get-by-name`);
  expect(down.lastError).toMatch(/did not answer: ECONNREFUSED/);

  const { stdout } = await run(
    path.join(ROOT, 'node_modules', '.bin', 'tsx'),
    ['cli/main.ts', 'mlflow', 'sync', runId, '--end', 'FINISHED', '--json'],
    {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL, MLFLOW_TRACKING_URI: server.url, LOG_LEVEL: 'warn' },
    },
  );
  expect(JSON.parse(stdout)).toEqual({ trackers: [{ tracker: 'mlflow', ok: true, stepsLogged: 2, evaluationsLogged: 2 }] });
  await expectFullyLogged(runId);
});

test('a worker without MLFLOW_TRACKING_URI records why nothing was logged, and the call still succeeds', async () => {
  const runId = uniqueRunId('mlflow-unset');
  await runToEnd(runId, 2);
  const result = await activitiesWith({}).trackRun({ runId });
  expect(result.trackers[0]).toMatchObject({ tracker: 'mlflow', ok: false });
  expect((await stack.store.tracking.find(runId, 'mlflow'))!.lastError).toMatch(/tracking\.mlflow.*no \$MLFLOW_TRACKING_URI/);
});

test("more params than one MLflow batch holds are all logged, long values cut to MLflow's limit", async () => {
  const tracker = mlflowTrackerFor(mlflow, { experiment: 'harness-s-it-params' });
  const run = await tracker.openRun({ runId: uniqueRunId('params'), name: 'params', env: 'sim', createdAt: new Date() });
  const params = Array.from({ length: 250 }, (_, i) => ({
    key: `p.${String(i).padStart(3, '0')}`,
    value: i === 0 ? 'x'.repeat(7000) : String(i),
  }));
  await tracker.logParams(run, params);
  const logged = (await mlflow.getRun(run.externalRunId)).data.params;
  expect(logged).toHaveLength(250);
  expect(logged.find((p) => p.key === 'p.000')!.value).toHaveLength(6000);
});

test('a run that failed ends its MLflow run FAILED with its report, and FINISHED once a recovery finishes it', async () => {
  const runId = uniqueRunId('mlflow-failed');
  await runToEnd(runId, 2);
  const activities = activitiesWith({ mlflow: server.url });
  const externalRunId = (await stack.store.tracking.find(runId, 'mlflow'))!.externalRunId!;
  await activities.trackRun({ runId, final: 'FAILED' });
  expect((await mlflow.getRun(externalRunId)).info.status).toBe('FAILED');
  expect((await stack.store.tracking.find(runId, 'mlflow'))!.endedAs).toBe('FAILED');
  await activities.trackRun({ runId, final: 'FINISHED' });
  expect((await mlflow.getRun(externalRunId)).info.status).toBe('FINISHED');
  await expectFullyLogged(runId);
});
