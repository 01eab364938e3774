/**
 * What the chaos tests break and measure: a Temporal dev server of their own
 * that can be killed and started again on the same port and SQLite file, a
 * private PostgreSQL instance that can be restarted (never the machine's
 * shared cluster), a stack over those (SIMULATED cluster in this process,
 * workers as separate processes), and the figures every chaos case prints:
 * the run's outcome, trajectories stored vs expected, trainer optimizer steps
 * vs training steps, and the time from the fault to the next progress.
 */
import { execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection, isGrpcServiceError } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { RunConfigInput } from '../../core/config';
import { loadSimWorld } from '../../core/envs/sim/world';
import { migrate, RunStore } from '../../core/store/run-store';
import { startDevServer, type DevServer } from '../../infra/temporal-dev-server';
import { startSimCluster, type SimCluster } from '../../sim-cluster/server';
import { installQuietTemporalRuntime } from '../../workers/runtime';
import { silentLogger } from './stack';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A free TCP port on 127.0.0.1 whose port + 1000 is free too (the dev server's
 * Web UI goes there). Below Linux's ephemeral range (32768 and up), so no
 * outgoing connection takes it between a kill and a restart.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if ((await isFree(port)) && (await isFree(port + 1000))) return port;
  }
}

function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const bound = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(bound));
    });
  });
}

function isFree(port: number): Promise<boolean> {
  return listenOnce(port).then(
    () => true,
    () => false,
  );
}

// ---------------------------------------------------------------------------
// A Temporal dev server that can be killed and started again

export interface RestartableDevServer {
  address: string;
  /** SIGKILL: no shutdown of any kind; resolves once the process is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port and SQLite file; resolves once it answers. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startRestartableDevServer(): Promise<RestartableDevServer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-chaos-temporal-'));
  const address = `127.0.0.1:${await freePort()}`;
  const options = { address, dbFile: path.join(dir, 'temporal.sqlite'), logFile: path.join(dir, 'temporal.log') };
  let server: DevServer = await startDevServer(options);
  if (!server.process) throw new Error(`a Temporal server already answered at ${address}; the chaos test needs its own`);
  return {
    address,
    async kill() {
      const child = server.process!;
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
    async restart() {
      server = await startDevServer(options);
    },
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------
// A private PostgreSQL instance

export interface PrivatePostgres {
  /** postgresql://postgres@127.0.0.1:<port>/<database> */
  url: string;
  /** Fast shutdown (every connection is cut), `downMs` with no server, start again; `downAt` is when the shutdown began. */
  restart(downMs: number): Promise<{ downAt: number; upAt: number }>;
  stop(): Promise<void>;
}

/** The newest PostgreSQL server binaries Debian installed (initdb, pg_ctl), or $PG_BIN_DIR. */
function postgresBinDir(): string {
  if (process.env.PG_BIN_DIR) return process.env.PG_BIN_DIR;
  const root = '/usr/lib/postgresql';
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) throw new Error(`no PostgreSQL server under ${root}; install postgresql or set PG_BIN_DIR`);
  return path.join(root, versions[0], 'bin');
}

/** initdb and postgres refuse to run as root: as root, they run as the `postgres` OS user. */
function asPostgresUserArgv(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

async function asPostgresUser(command: string, args: string[]): Promise<void> {
  try {
    await run(...asPostgresUserArgv(command, args), { cwd: os.tmpdir() });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${path.basename(command)} ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
  }
}

async function postgresUserIds(): Promise<{ uid: number; gid: number }> {
  const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
}

export async function startPrivatePostgres(database = 'harness_s_chaos'): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-chaos-pg-'));
  if (process.getuid?.() === 0) {
    const { uid, gid } = await postgresUserIds();
    chownSync(dir, uid, gid);
  }
  const dataDir = path.join(dir, 'data');
  const port = await freePort();
  await asPostgresUser(path.join(bin, 'initdb'), ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  const pgCtl = path.join(bin, 'pg_ctl');
  // A test instance: durability across a crash is not what is tested, speed is welcome.
  const serverOptions = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const start = () => asPostgresUser(pgCtl, ['-D', dataDir, '-l', path.join(dir, 'postgres.log'), '-o', serverOptions, '-w', 'start']);
  const stop = (mode: 'fast' | 'immediate') => asPostgresUser(pgCtl, ['-D', dataDir, '-m', mode, '-w', 'stop']);
  await start();
  // Like the dev server, the instance never outlives the test process, even one that dies.
  const stopOnExit = () => {
    try {
      execFileSync(...asPostgresUserArgv(pgCtl, ['-D', dataDir, '-m', 'immediate', 'stop']), { stdio: 'ignore', cwd: os.tmpdir() });
    } catch {
      // Already stopped.
    }
  };
  process.once('exit', stopOnExit);
  const url = `postgresql://postgres@127.0.0.1:${port}/${database}`;
  await migrate(url);
  return {
    url,
    async restart(downMs) {
      const downAt = Date.now();
      await stop('fast');
      await sleep(downMs);
      await start();
      return { downAt, upAt: Date.now() };
    },
    async stop() {
      process.off('exit', stopOnExit);
      await stop('immediate').catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------
// The stack the chaos runs use: their own Temporal and database, workers elsewhere

export interface ChaosStack {
  temporalAddress: string;
  databaseUrl: string;
  client: Client;
  store: RunStore;
  sim: SimCluster;
  /** A small sim run against this stack's sim cluster. */
  config(overrides?: Partial<RunConfigInput>): RunConfigInput;
  /** The environment a worker process of this stack needs. */
  workerEnv(identity: string): Record<string, string>;
  close(): Promise<void>;
}

export async function startChaosStack(options: { temporalAddress: string; databaseUrl: string }): Promise<ChaosStack> {
  installQuietTemporalRuntime();
  await migrate(options.databaseUrl);
  // A restarted database cuts idle connections; the pool drops them and reconnects (connect listens for that, so Node does not throw).
  const store = RunStore.connect(options.databaseUrl);
  const sim = await startSimCluster({
    world: loadSimWorld(),
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'harness-s-sim-')),
    logger: silentLogger,
  });
  const connection = await Connection.connect({ address: options.temporalAddress });
  const client = new Client({ connection });
  return {
    ...options,
    client,
    store,
    sim,
    config: (overrides = {}) => ({
      name: 'chaos-run',
      env: { kind: 'sim' },
      steps: 3,
      seed: 11,
      policy: { baseUrl: `${sim.url}/v1` },
      trainer: { baseUrl: sim.url, pollSeconds: 0.02 },
      rollout: { tasksPerStep: 4, groupSize: 4, maxTurns: 3, concurrency: 1 },
      rescue: { enabled: true, k: 2 },
      router: { probeTasksPerKind: 1, probeRollouts: 2 },
      eval: { enabled: false },
      ...overrides,
    }),
    workerEnv: (identity) => ({
      TEMPORAL_ADDRESS: options.temporalAddress,
      DATABASE_URL: options.databaseUrl,
      HARNESS_S_WORKER_IDENTITY: identity,
    }),
    async close() {
      await connection.close();
      await sim.close();
      await store.close();
    },
  };
}

// ---------------------------------------------------------------------------
// Catching a run mid-step, and what it stored

/** Resolves once `step` has some rollouts stored and is not recorded yet (the step before it is). */
export async function waitUntilMidStep(store: RunStore, runId: string, step: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await store.queryForTests(
      `SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1 AND phase = 'train' AND step = $2`,
      [runId, step],
    );
    const recorded = (await store.steps(runId)).length;
    if (rows[0].n > 0 && recorded === step) return;
    if (recorded > step || Date.now() > deadline)
      throw new Error(`never caught run ${runId} in the middle of step ${step} (${recorded} steps recorded)`);
    await sleep(10);
  }
}

export interface RunFigures {
  stepsCompleted: number;
  /** Train-phase trajectories in the store; the primary key (step, task, harness, sample) keeps each one once. */
  trajectoriesStored: number;
  /** Σ over recorded steps of base rollouts (tasksPerStep × groupSize) plus rescue rollouts. */
  trajectoriesExpected: number;
  /** Base rollouts per recorded step; each must be tasksPerStep × groupSize. */
  baseRolloutsPerStep: number[];
  /** Optimizer steps the sim trainer applied to the run's model. */
  optimizerSteps: number;
  /** Recorded steps with datums to train on. */
  trainingSteps: number;
}

/** What a run left behind: in the store, and in the sim trainer. */
export async function runFigures(stack: ChaosStack, runId: string, stepsCompleted: number): Promise<RunFigures> {
  const steps = (await stack.store.steps(runId)).map((s) => s.summary);
  const trainer = await stack.store.trainerStep(runId, 0);
  if (!trainer) throw new Error(`run ${runId} stored no trainer step 0`);
  const response = await fetch(`${stack.sim.url}/api/v1/get_info`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model_id: trainer.modelId }),
  });
  const info = (await response.json()) as { optim_steps: number };
  return {
    stepsCompleted,
    trajectoriesStored: await stack.store.countTrajectories(runId),
    trajectoriesExpected: steps.reduce((n, s) => n + s.baseRollouts + s.rescueRollouts, 0),
    baseRolloutsPerStep: steps.map((s) => s.baseRollouts),
    optimizerSteps: info.optim_steps,
    trainingSteps: steps.filter((s) => s.datums > 0).length,
  };
}

/** When the first train trajectory stored after `since` was written (the database's clock), or null. */
export async function firstTrajectoryAfter(store: RunStore, runId: string, since: number): Promise<number | null> {
  const { rows } = await store.queryForTests(
    `SELECT min(created_at) AS t FROM trajectories WHERE run_id = $1 AND phase = 'train' AND created_at > $2`,
    [runId, new Date(since)],
  );
  return rows[0].t ? new Date(rows[0].t).getTime() : null;
}

/** When step `step` was recorded, or null. */
export async function stepRecordedAt(store: RunStore, runId: string, step: number): Promise<number | null> {
  const record = (await store.steps(runId)).find((s) => s.step === step);
  return record ? record.completedAt.getTime() : null;
}

// ---------------------------------------------------------------------------
// The run's step children, as Temporal recorded them

const EventType = temporal.api.enums.v1.EventType;
/** gRPC status NOT_FOUND: the history of a workflow that does not exist (yet). */
const GRPC_NOT_FOUND = 5;

export interface ActivityRecord {
  activityType: string;
  taskQueue: string;
  /** The worker that ran the attempt recorded in history (the last one). */
  identity: string;
  /** Which attempt was recorded: above 1 when earlier attempts failed or timed out. */
  attempt: number;
  /** When it completed (the server's clock), or null if it did not. */
  completedAt: number | null;
}

/**
 * Every activity of the run's step children (`<runId>/step-<n>`, up to
 * `steps`), from their histories; a step child not started yet ends the list.
 * An activity shows once it has completed or failed for good.
 */
export async function stepActivities(client: Client, runId: string, steps: number): Promise<ActivityRecord[]> {
  const records: ActivityRecord[] = [];
  for (let step = 0; step < steps; step++) {
    const history = await client.workflow
      .getHandle(`${runId}/step-${step}`)
      .fetchHistory()
      .catch((err: unknown) => {
        if (isGrpcServiceError(err) && err.code === GRPC_NOT_FOUND) return null;
        throw err;
      });
    if (!history) break;
    const scheduled = new Map<string, { activityType: string; taskQueue: string }>();
    const started = new Map<string, ActivityRecord>();
    for (const event of history.events ?? []) {
      const id = String(event.eventId);
      if (event.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) {
        const attrs = event.activityTaskScheduledEventAttributes!;
        scheduled.set(id, { activityType: attrs.activityType?.name ?? '', taskQueue: attrs.taskQueue?.name ?? '' });
      } else if (event.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED) {
        const attrs = event.activityTaskStartedEventAttributes!;
        const record = {
          ...scheduled.get(String(attrs.scheduledEventId))!,
          identity: attrs.identity ?? '',
          attempt: attrs.attempt ?? 1,
          completedAt: null,
        };
        started.set(String(attrs.scheduledEventId), record);
        records.push(record);
      } else if (event.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) {
        const record = started.get(String(event.activityTaskCompletedEventAttributes!.scheduledEventId));
        if (record) record.completedAt = eventTimeMs(event);
      }
    }
  }
  return records;
}

function eventTimeMs(event: temporal.api.history.v1.IHistoryEvent): number {
  const t = event.eventTime!;
  return Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6);
}

/** The first activity completion Temporal recorded after `since`, or null. */
export function firstCompletionAfter(activities: ActivityRecord[], since: number): number | null {
  const times = activities.map((a) => a.completedAt).filter((t): t is number => t !== null && t > since);
  return times.length ? Math.min(...times) : null;
}

/**
 * The run's result, or a failure as soon as one of `workers` exits: a worker
 * process that dies of the fault is the defect under test, not a slow run.
 */
export function resultWhileWorkersLive<T>(result: Promise<T>, workers: Record<string, ChildProcess>): Promise<T> {
  const died = Object.entries(workers).map(
    ([name, worker]) =>
      new Promise<never>((_, reject) => {
        const fail = () =>
          reject(new Error(`worker process ${name} exited (${worker.signalCode ?? `code ${worker.exitCode}`}) before the run finished`));
        if (worker.exitCode !== null || worker.signalCode !== null) fail();
        else worker.once('exit', fail);
      }),
  );
  return Promise.race([result, ...died]);
}

/** One JSON line a closing note can quote: the case and its figures. */
export function printFigures(chaosCase: string, figures: Record<string, unknown>): void {
  process.stderr.write(`${JSON.stringify({ chaos: chaosCase, ...figures })}\n`);
}
