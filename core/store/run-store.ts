/**
 * The run store in PostgreSQL. Every write is idempotent (keyed inserts with
 * ON CONFLICT DO NOTHING), so any activity may run twice and nothing doubles.
 */
import path from 'node:path';
import { Client, Pool, type PoolClient, type QueryResultRow } from 'pg';
import { runner } from 'node-pg-migrate';
import type { AdapterProbe } from '../policy/adapter-probe';
import type { Trajectory } from '../policy/trajectory';
import type { RolloutSummary } from '../rl/groups';
import type { BehaviorProfiles } from '../router/profiles';
import type { RoutingDecision } from '../router/router';
import type { EvaluationSummary } from '../rl/evaluation';
import { UserError } from '../errors';
import { EvolutionStore } from './evolution-store';
import { TrackingStore } from './tracking-store';
import { TrainingBatchStore } from './training-batch-store';
import { SessionLeaseStore } from './session-lease-store';
import { ReplicaStore } from './replica-store';
import { parseRow, storableMessage, StoredEvaluationSummary, StoredProfileCells, StoredRoutingColumns, StoredStepSummary, StoredTrainerStepColumns } from './rows';

export const DEFAULT_DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/harness_s';
const MIGRATIONS_DIR = path.join(__dirname, 'migrations');

export function databaseUrlFromEnv(): string {
  return process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
}

export const DB_POOL_SIZE_VARIABLE = 'HARNESS_S_DB_POOL_SIZE';
/** PostgreSQL connections one process may open when $HARNESS_S_DB_POOL_SIZE is unset (pg's own default). */
export const DEFAULT_DB_POOL_SIZE = 10;
const MAX_DB_POOL_SIZE = 1000;

export class DbPoolSizeError extends UserError {
  override name = 'DbPoolSizeError';
}

/**
 * How many PostgreSQL connections a process's run store may open, from
 * $HARNESS_S_DB_POOL_SIZE (a whole number from 1 to 1000; 10 when unset).
 * Read once at process start; the server's max_connections must cover the
 * sum over every process (docker-compose.yml derives it from this).
 */
export function dbPoolSizeFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = (env[DB_POOL_SIZE_VARIABLE] ?? '').trim();
  if (raw === '') return DEFAULT_DB_POOL_SIZE;
  const size = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isInteger(size) || size < 1 || size > MAX_DB_POOL_SIZE) {
    throw new DbPoolSizeError(
      `${DB_POOL_SIZE_VARIABLE}='${raw}' is not a connection pool size: use a whole number from 1 to ${MAX_DB_POOL_SIZE} (unset: ${DEFAULT_DB_POOL_SIZE})`,
    );
  }
  return size;
}

/** A database URL for messages: its password is never printed. */
export function redactedDatabaseUrl(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return databaseUrl;
  }
}

/** Creates the URL's database when the server does not have it yet. */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) throw new Error(`DATABASE_URL ${databaseUrl} names no database`);
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) {
      await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
        // Created meanwhile by another process (42P04; 23505 when both inserted into pg_database at once).
        if (err.code !== '42P04' && err.code !== '23505') throw err;
      });
    }
  } finally {
    await client.end();
  }
}

const reportLostConnection = (err: Error) =>
  process.stderr.write(`run store: the database cut an idle connection (${err.message}); the pool reconnects on the next query\n`);

/** How long a process waits for another one's migrations before giving up. */
const MIGRATION_WAIT_MS = 120_000;

/**
 * Applies pending migrations; safe to run from several processes at once
 * (workers started together): node-pg-migrate holds an advisory lock and
 * refuses at once while another process holds it, so this waits for that
 * process and tries again (its migrations are then done).
 */
export async function migrate(databaseUrl: string): Promise<void> {
  await ensureDatabase(databaseUrl);
  const deadline = Date.now() + MIGRATION_WAIT_MS;
  for (;;) {
    try {
      await runner({
        databaseUrl,
        dir: MIGRATIONS_DIR,
        direction: 'up',
        migrationsTable: 'pgmigrations',
        count: Infinity,
        log: () => undefined,
        checkOrder: true,
      });
      return;
    } catch (err) {
      const busy = err instanceof Error && /another migration is already running/i.test(err.message);
      if (!busy || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250 + Math.random() * 250));
    }
  }
}

/** A Tinker session a run's trainer model lives in, with where the run's config says its trainer is. */
export interface LiveTrainerSession {
  runId: string;
  sessionId: string;
  trainerBaseUrl: string;
  /** The variable the run's config names for the trainer's key; null: no key. */
  trainerApiKeyEnv: string | null;
}

export interface StoredRun {
  runId: string;
  name: string;
  env: string;
  config: unknown;
  trainerModelId: string | null;
  /** The Tinker session that owns the trainer model. */
  trainerSessionId: string | null;
  /** The content hash of the harness pool the run trained with (core/harness/frozen-pool.ts). */
  poolHash: string | null;
  /** A fork's parent run and the step whose checkpoint it started from; null for a run started anew. */
  parent: { runId: string; step: number } | null;
  createdAt: Date;
  /** When summarizeRun summed the run up at its end; null while it goes on, and for a run that failed or was cancelled. */
  finishedAt: Date | null;
}

/** A training-state checkpoint a run saved (weights and optimizer state). */
export interface CheckpointRecord {
  runId: string;
  /** The step whose trained state it holds. */
  step: number;
  modelId: string;
  name: string;
  /** tinker://<model>/weights/<name> */
  path: string;
  policyVersion: string;
  createdAt: Date;
  deletedAt: Date | null;
}

export type RestoreKind = 'checkpoint' | 'base' | 'fork';

/** A run's trainer model made anew (trainer_restores in the migrations). */
export interface RestoreRecord {
  runId: string;
  restore: number;
  kind: RestoreKind;
  /** The step that found the model gone (a fork: its first step). */
  atStep: number;
  fromRunId: string | null;
  /** The step whose state was loaded; null when the model started over from the base. */
  fromStep: number | null;
  checkpointPath: string | null;
  lostModelId: string | null;
  modelId: string | null;
  sessionId: string | null;
  policyVersion: string | null;
  samplerPath: string | null;
  reason: string;
  status: 'loading' | 'done';
  createdAt: Date;
  completedAt: Date | null;
}

export interface StepRecord {
  runId: string;
  step: number;
  policyVersion: string;
  summary: StoredStepSummary;
  completedAt: Date;
}

export interface TrainerStepRecord {
  runId: string;
  step: number;
  modelId: string;
  samplerPath: string;
  policyVersion: string;
  datums: number;
  responseTokens: number;
  metrics: Record<string, number>;
  /** The publish probe: a token sequence and the trainer's log-probs of it under this step's weights. */
  probe: AdapterProbe | null;
}

export interface TrainerOpSeq {
  seqId: number;
  /** The checkpoint name, for an op that saves one; else null. */
  checkpointName: string | null;
}

export interface TrainerOpRecord {
  modelId: string;
  seqId: number;
  step: number;
  op: string;
  checkpointName: string | null;
  failed: boolean;
  failure: string | null;
}

export interface TrajectoryKey {
  phase: string;
  step: number;
  taskId: string;
  harnessId: string;
  sample: number;
}

/** A routing decision as stored, with how each chosen sibling did once its step was recorded. */
export interface StoredRoutingDecision extends RoutingDecision {
  step: number;
  /** harness id -> its rescue rollouts and successes; null until the step is recorded. */
  outcome: Record<string, { rollouts: number; successes: number }> | null;
}

export class RunIdInUseError extends UserError {
  override name = 'RunIdInUseError';
  constructor(runId: string) {
    super(`run id ${runId} was already used by another run, whose results are stored under it; start with another id, or continue that run with \`harness-s run recover ${runId}\``);
  }
}

export class RunStore {
  /** The evolution records and frozen pools (evolution-store.ts), on the same connection pool. */
  readonly evolutions: EvolutionStore;
  /** What each run has logged to experiment trackers (tracking-store.ts). */
  readonly tracking: TrackingStore;
  /** Training steps' batches, which the trainer reads by reference (training-batch-store.ts). */
  readonly trainingBatches: TrainingBatchStore;
  /** The leases on remote env servers' session slots, shared by every host (session-lease-store.ts). */
  readonly sessionLeases: SessionLeaseStore;
  /** Which policy versions each inference replica serves (replica-store.ts). */
  readonly replicas: ReplicaStore;

  constructor(readonly pool: Pool) {
    this.evolutions = new EvolutionStore(pool);
    this.tracking = new TrackingStore(pool);
    this.trainingBatches = new TrainingBatchStore(pool);
    this.sessionLeases = new SessionLeaseStore(pool);
    this.replicas = new ReplicaStore(pool);
  }

  /**
   * A database restart cuts the pool's idle connections, which pg reports as
   * an 'error' event on the pool: with no listener, that ends the process. The
   * pool drops those connections and opens new ones on the next query; a query
   * in flight fails (an activity is retried). `onConnectionLost` says so where
   * the caller logs; stderr when absent. `poolSize`: the most connections it
   * opens (dbPoolSizeFromEnv at process start).
   */
  static connect(databaseUrl: string, onConnectionLost: (err: Error) => void = reportLostConnection, poolSize = DEFAULT_DB_POOL_SIZE): RunStore {
    const pool = new Pool({ connectionString: databaseUrl, max: poolSize });
    pool.on('error', onConnectionLost);
    return new RunStore(pool);
  }

  close(): Promise<void> {
    return this.pool.end();
  }

  /**
   * Registers a run for an execution chain (`incarnation`). A chain may register
   * again (activity retries, continue-as-new). Another chain may take the run
   * over only when it says it continues it (`takeOver`: recovery); otherwise
   * the id is refused, since its stored results belong to another run.
   */
  async registerRun(run: { runId: string; name: string; env: string; config: unknown; incarnation: string; takeOver: boolean; poolHash?: string | null }): Promise<void> {
    const { rows } = await this.pool.query(
      `INSERT INTO runs (run_id, name, env, config, incarnation, pool_hash) VALUES ($1, $2, $3, $4, $5, $7)
       ON CONFLICT (run_id) DO UPDATE SET config = EXCLUDED.config, incarnation = EXCLUDED.incarnation,
         pool_hash = COALESCE(EXCLUDED.pool_hash, runs.pool_hash), updated_at = now()
         WHERE runs.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation OR $6::boolean
       RETURNING run_id`,
      [run.runId, run.name, run.env, JSON.stringify(run.config), run.incarnation, run.takeOver, run.poolHash ?? null],
    );
    if (rows.length === 0) throw new RunIdInUseError(run.runId);
  }

  /**
   * Replaces a run's config (a safe change made while it runs) and keeps, per
   * step, the config that step started with after a change.
   */
  async updateRunConfig(runId: string, fromStep: number, config: unknown): Promise<void> {
    await this.transaction(async (client) => {
      const { rowCount } = await client.query('UPDATE runs SET config = $2, updated_at = now() WHERE run_id = $1', [runId, JSON.stringify(config)]);
      if (rowCount === 0) throw new Error(`run ${runId} is not registered in the run store`);
      await client.query(
        `INSERT INTO run_config_changes (run_id, from_step, config) VALUES ($1, $2, $3)
         ON CONFLICT (run_id, from_step) DO UPDATE SET config = EXCLUDED.config, created_at = now()`,
        [runId, fromStep, JSON.stringify(config)],
      );
    });
  }

  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  private async transaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK');
      throw err;
    } finally {
      client.release();
    }
  }

  /** The config changes of a run: from which step each config applied. */
  async configChanges(runId: string): Promise<Array<{ fromStep: number; config: unknown }>> {
    const { rows } = await this.pool.query('SELECT from_step, config FROM run_config_changes WHERE run_id = $1 ORDER BY from_step', [runId]);
    return rows.map((r) => ({ fromStep: r.from_step, config: r.config }));
  }

  async getRun(runId: string): Promise<StoredRun | null> {
    const { rows } = await this.pool.query('SELECT * FROM runs WHERE run_id = $1', [runId]);
    if (rows.length === 0) return null;
    const r = rows[0];
    return {
      runId: r.run_id, name: r.name, env: r.env, config: r.config,
      trainerModelId: r.trainer_model_id, trainerSessionId: r.trainer_session_id, poolHash: r.pool_hash,
      parent: r.parent_run_id === null ? null : { runId: r.parent_run_id, step: r.parent_step }, createdAt: r.created_at,
      finishedAt: r.finished_at ?? null,
    };
  }

  /** Records a fork's parent once (a retried prepareRun finds it set). */
  async setParent(runId: string, parent: { runId: string; step: number }): Promise<void> {
    await this.pool.query(
      'UPDATE runs SET parent_run_id = $2, parent_step = $3 WHERE run_id = $1 AND parent_run_id IS NULL',
      [runId, parent.runId, parent.step],
    );
  }

  // ---------------------------------------------------------- checkpoints

  /** Records a saved checkpoint once. */
  async recordCheckpoint(c: { runId: string; step: number; modelId: string; name: string; path: string; policyVersion: string }): Promise<void> {
    await this.pool.query(
      `INSERT INTO checkpoints (run_id, step, model_id, name, path, policy_version) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (run_id, model_id, name) DO NOTHING`,
      [c.runId, c.step, c.modelId, c.name, c.path, c.policyVersion],
    );
  }

  /** A run's checkpoints not deleted, oldest step first (all of them with `includeDeleted`). */
  async checkpoints(runId: string, options: { includeDeleted?: boolean } = {}): Promise<CheckpointRecord[]> {
    const { rows } = await this.pool.query(
      `SELECT * FROM checkpoints WHERE run_id = $1 AND ($2::boolean OR deleted_at IS NULL) ORDER BY step, created_at`,
      [runId, options.includeDeleted ?? false],
    );
    return rows.map(checkpointRecord);
  }

  /** Marks a checkpoint deleted: the trainer deleted it, or no longer has it. */
  async markCheckpointDeleted(runId: string, modelId: string, name: string): Promise<void> {
    await this.pool.query('UPDATE checkpoints SET deleted_at = now() WHERE run_id = $1 AND model_id = $2 AND name = $3 AND deleted_at IS NULL', [runId, modelId, name]);
  }

  // ------------------------------------------------------------- restores

  /**
   * Starts a restore once per lost model (a fork's load: once, as restore 0),
   * numbering restores 1, 2, ...: a retried restore gets the row the first
   * attempt wrote, with the model it was loading, if any.
   */
  async startRestore(r: {
    runId: string; kind: RestoreKind; atStep: number; fromRunId: string | null; fromStep: number | null;
    checkpointPath: string | null; lostModelId: string | null; reason: string;
  }): Promise<RestoreRecord> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const found = await this.findRestore(r.runId, r.lostModelId);
      if (found) return found;
      await this.pool.query(
        `INSERT INTO trainer_restores (run_id, restore, kind, at_step, from_run_id, from_step, checkpoint_path, lost_model_id, reason)
         SELECT $1, CASE WHEN $2 = 'fork' THEN 0 ELSE COALESCE(MAX(restore), 0) + 1 END, $2, $3, $4, $5, $6, $7, $8
           FROM trainer_restores WHERE run_id = $1
         ON CONFLICT DO NOTHING`,
        [r.runId, r.kind, r.atStep, r.fromRunId, r.fromStep, r.checkpointPath, r.lostModelId, r.reason],
      );
    }
    throw new Error(`run ${r.runId}: no number could be given to the restore of model ${r.lostModelId}`);
  }

  /** The restore of a lost model (a fork's load when `lostModelId` is null). */
  async findRestore(runId: string, lostModelId: string | null): Promise<RestoreRecord | null> {
    const { rows } = await this.pool.query(
      'SELECT * FROM trainer_restores WHERE run_id = $1 AND (lost_model_id = $2 OR ($2::text IS NULL AND restore = 0))',
      [runId, lostModelId],
    );
    return rows.length === 0 ? null : restoreRecord(rows[0]);
  }

  /** The model a restore is loading into (written before the load, so a retry can free it). */
  async setRestoreModel(runId: string, restore: number, modelId: string, sessionId: string): Promise<void> {
    await this.pool.query(
      `UPDATE trainer_restores SET model_id = $3, session_id = $4 WHERE run_id = $1 AND restore = $2 AND status = 'loading'`,
      [runId, restore, modelId, sessionId],
    );
  }

  /**
   * Completes a restore in one transaction: the run moves to the restored
   * model, and what the steps after the loaded one stored is marked
   * superseded by this restore (trajectories, steps, trainer steps, routing
   * decisions of steps after `fromStep`; evaluations after more than
   * fromStep + 1 steps). A fork (nothing to supersede) only moves the model.
   */
  async completeRestore(r: { runId: string; restore: number; modelId: string; sessionId: string; policyVersion: string; samplerPath: string | null }): Promise<RestoreRecord> {
    await this.transaction(async (client) => {
      const { rows } = await client.query(
        `UPDATE trainer_restores SET status = 'done', completed_at = now(), model_id = $3, session_id = $4, policy_version = $5, sampler_path = $6
         WHERE run_id = $1 AND restore = $2 AND status = 'loading' RETURNING from_step, kind`,
        [r.runId, r.restore, r.modelId, r.sessionId, r.policyVersion, r.samplerPath],
      );
      if (rows.length === 0) return;
      await client.query('UPDATE runs SET trainer_model_id = $2, trainer_session_id = $3, updated_at = now() WHERE run_id = $1', [r.runId, r.modelId, r.sessionId]);
      if (rows[0].kind === 'fork') return;
      const after = rows[0].from_step ?? -1;
      const args = [r.runId, r.restore, after];
      await client.query(
        `UPDATE trajectories SET superseded_by = $2 WHERE run_id = $1 AND superseded_by IS NULL
           AND ((phase = 'train' AND step > $3) OR (phase = 'eval' AND step > $3 + 1))`,
        args,
      );
      for (const table of ['steps', 'trainer_steps', 'routing_decisions']) {
        await client.query(`UPDATE ${table} SET superseded_by = $2 WHERE run_id = $1 AND superseded_by IS NULL AND step > $3`, args);
      }
      await client.query('UPDATE evaluations SET superseded_by = $2 WHERE run_id = $1 AND superseded_by IS NULL AND after_steps > $3 + 1', args);
    });
    return (await this.restore(r.runId, r.restore))!;
  }

  async restore(runId: string, restore: number): Promise<RestoreRecord | null> {
    const { rows } = await this.pool.query('SELECT * FROM trainer_restores WHERE run_id = $1 AND restore = $2', [runId, restore]);
    return rows.length === 0 ? null : restoreRecord(rows[0]);
  }

  /** A run's restores (and a fork's load, restore 0), in order. */
  async restores(runId: string): Promise<RestoreRecord[]> {
    const { rows } = await this.pool.query('SELECT * FROM trainer_restores WHERE run_id = $1 ORDER BY restore', [runId]);
    return rows.map(restoreRecord);
  }

  /** How many rows of each kind a restore marked superseded (for reports and tests). */
  async supersededBy(runId: string, restore: number): Promise<{ trajectories: number; steps: number; trainerSteps: number }> {
    const { rows } = await this.pool.query(
      `SELECT (SELECT count(*)::int FROM trajectories WHERE run_id = $1 AND superseded_by = $2) AS trajectories,
              (SELECT count(*)::int FROM steps WHERE run_id = $1 AND superseded_by = $2) AS steps,
              (SELECT count(*)::int FROM trainer_steps WHERE run_id = $1 AND superseded_by = $2) AS trainer_steps`,
      [runId, restore],
    );
    return { trajectories: rows[0].trajectories, steps: rows[0].steps, trainerSteps: rows[0].trainer_steps };
  }

  /** Marks a run finished, once (its first summary's time stands); its trainer session is no longer kept. */
  async markRunFinished(runId: string): Promise<void> {
    await this.pool.query('UPDATE runs SET finished_at = COALESCE(finished_at, now()) WHERE run_id = $1', [runId]);
  }

  /**
   * The trainer sessions of runs not finished that did something (registered,
   * changed, trained a model, completed a step) in the last `activeWithinSeconds`:
   * each run's model's session, and the session of a restore still loading a
   * new model. A run with both is listed once per session.
   */
  async liveTrainerSessions(activeWithinSeconds: number): Promise<LiveTrainerSession[]> {
    const { rows } = await this.pool.query(
      `SELECT r.run_id, s.session_id, r.config->'trainer'->>'baseUrl' AS base_url, r.config->'trainer'->>'apiKeyEnv' AS api_key_env
         FROM runs r
         CROSS JOIN LATERAL (
           SELECT r.trainer_session_id AS session_id WHERE r.trainer_session_id IS NOT NULL
           UNION
           SELECT t.session_id FROM trainer_restores t WHERE t.run_id = r.run_id AND t.status = 'loading' AND t.session_id IS NOT NULL
         ) s
        WHERE r.finished_at IS NULL
          AND r.config->'trainer'->>'baseUrl' IS NOT NULL
          AND GREATEST(r.updated_at, (SELECT max(completed_at) FROM steps WHERE steps.run_id = r.run_id)) > now() - make_interval(secs => $1)
        ORDER BY r.run_id, s.session_id`,
      [activeWithinSeconds],
    );
    return rows.map((r) => ({ runId: r.run_id, sessionId: r.session_id, trainerBaseUrl: r.base_url, trainerApiKeyEnv: r.api_key_env }));
  }

  /** Records the trainer's model id (and the session owning it) once; returns whichever was stored first. */
  async claimTrainerModel(runId: string, modelId: string, sessionId: string): Promise<{ modelId: string; sessionId: string | null }> {
    const { rows } = await this.pool.query(
      `UPDATE runs SET trainer_session_id = CASE WHEN trainer_model_id IS NULL THEN $3 ELSE trainer_session_id END,
                       trainer_model_id = COALESCE(trainer_model_id, $2), updated_at = now()
       WHERE run_id = $1 RETURNING trainer_model_id, trainer_session_id`,
      [runId, modelId, sessionId],
    );
    if (rows.length === 0) throw new Error(`run ${runId} is not registered in the run store`);
    return { modelId: rows[0].trainer_model_id, sessionId: rows[0].trainer_session_id };
  }

  /** Stores trajectories not stored yet; returns those it stored (one stored before, by an earlier attempt, is kept as it was). */
  async insertTrajectories(runId: string, phase: string, step: number, role: string, trajectories: readonly Trajectory[]): Promise<Trajectory[]> {
    if (trajectories.length === 0) return [];
    const columns = 20;
    const values: unknown[] = [];
    const tuples = trajectories.map((t, i) => {
      values.push(
        runId, phase, step, t.taskId, t.harnessId, t.sample, role, t.taskKind, t.policyVersion,
        t.reward, t.success, t.failureType, t.turns, t.tokens, t.latencyMs,
        JSON.stringify(t.messages.map(storableMessage)), JSON.stringify(t.samples), t.promptTokens, t.completionTokens,
        t.interventions === undefined ? null : JSON.stringify(t.interventions),
      );
      return `(${Array.from({ length: columns }, (_, j) => `$${i * columns + j + 1}`).join(', ')})`;
    });
    const { rows } = await this.pool.query(
      `INSERT INTO trajectories (run_id, phase, step, task_id, harness_id, sample, role, task_kind, policy_version,
         reward, success, failure_type, turns, tokens, latency_ms, messages, samples, prompt_tokens, completion_tokens, interventions)
       VALUES ${tuples.join(', ')}
       ON CONFLICT (run_id, phase, step, task_id, harness_id, sample) WHERE superseded_by IS NULL DO NOTHING
       RETURNING task_id, harness_id, sample`,
      values,
    );
    const inserted = new Set(rows.map((r) => `${r.task_id}/${r.harness_id}/${r.sample}`));
    return trajectories.filter((t) => inserted.has(`${t.taskId}/${t.harnessId}/${t.sample}`));
  }

  /**
   * Seconds, on the database's clock, since the last rollout of a task's group
   * in `role` was stored at a step; null when it has none.
   */
  async secondsSinceGroupStored(runId: string, phase: string, step: number, taskId: string, role: string): Promise<number | null> {
    const { rows } = await this.pool.query(
      `SELECT extract(epoch FROM now() - max(created_at))::float8 AS seconds FROM trajectories
       WHERE run_id = $1 AND phase = $2 AND step = $3 AND task_id = $4 AND role = $5 AND superseded_by IS NULL`,
      [runId, phase, step, taskId, role],
    );
    return rows[0].seconds;
  }

  /** Summaries of the stored rollouts of one task at one step, for the given harnesses. */
  async rolloutSummaries(runId: string, phase: string, step: number, taskId: string, harnessIds: readonly string[]): Promise<RolloutSummary[]> {
    const { rows } = await this.pool.query(
      `SELECT harness_id, sample, reward, success, failure_type, turns, tokens, prompt_tokens, completion_tokens FROM trajectories
       WHERE run_id = $1 AND phase = $2 AND step = $3 AND task_id = $4 AND harness_id = ANY($5) AND superseded_by IS NULL
       ORDER BY harness_id, sample`,
      [runId, phase, step, taskId, harnessIds],
    );
    return rows.map((r) => ({
      harnessId: r.harness_id,
      sample: r.sample,
      reward: r.reward,
      success: r.success,
      failureType: r.failure_type,
      turns: r.turns,
      tokens: r.tokens,
      ...(r.prompt_tokens === null ? {} : { promptTokens: r.prompt_tokens, completionTokens: r.completion_tokens }),
    }));
  }

  /** Token samples of the given trajectories, keyed `taskId/harnessId/sample`. */
  async tokenSamples(runId: string, phase: string, step: number, taskIds: readonly string[]): Promise<Map<string, Trajectory['samples']>> {
    const { rows } = await this.pool.query(
      `SELECT task_id, harness_id, sample, samples FROM trajectories
       WHERE run_id = $1 AND phase = $2 AND step = $3 AND task_id = ANY($4) AND superseded_by IS NULL`,
      [runId, phase, step, taskIds],
    );
    return new Map(rows.map((r) => [`${r.task_id}/${r.harness_id}/${r.sample}`, r.samples]));
  }

  /** Records a step once; true when this call stored it, false when it was stored before. */
  async recordStep(runId: string, step: number, policyVersion: string, summary: unknown): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `INSERT INTO steps (run_id, step, policy_version, summary) VALUES ($1, $2, $3, $4)
       ON CONFLICT (run_id, step) WHERE superseded_by IS NULL DO NOTHING`,
      [runId, step, policyVersion, JSON.stringify(summary)],
    );
    return rowCount === 1;
  }

  async steps(runId: string): Promise<StepRecord[]> {
    const { rows } = await this.pool.query('SELECT * FROM steps WHERE run_id = $1 AND superseded_by IS NULL ORDER BY step', [runId]);
    return rows.map(stepRecord);
  }

  async lastStep(runId: string): Promise<StepRecord | null> {
    const { rows } = await this.pool.query('SELECT * FROM steps WHERE run_id = $1 AND superseded_by IS NULL ORDER BY step DESC LIMIT 1', [runId]);
    return rows.length === 0 ? null : stepRecord(rows[0]);
  }

  async recordTrainerStep(record: TrainerStepRecord): Promise<void> {
    await this.pool.query(
      `INSERT INTO trainer_steps (run_id, step, model_id, sampler_path, policy_version, datums, response_tokens, metrics, probe)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (run_id, step) WHERE superseded_by IS NULL DO NOTHING`,
      [
        record.runId, record.step, record.modelId, record.samplerPath, record.policyVersion, record.datums, record.responseTokens,
        JSON.stringify(record.metrics), record.probe === null ? null : JSON.stringify(record.probe),
      ],
    );
  }

  /**
   * The seq_id of a step's trainer op (see trainer_ops in the migrations): the
   * one it was given, when it has one that did not fail, else the model's
   * next (one past the highest it has used). A checkpointing op also gets its
   * checkpoint name: `checkpointName` the first time, with `-s<seq_id>` after
   * it once failed (a trainer keeps a failed checkpoint's name taken).
   */
  async trainerOpSeq(args: { runId: string; step: number; op: string; modelId: string; checkpointName?: string }): Promise<TrainerOpSeq> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const live = await this.pool.query(
        'SELECT seq_id, checkpoint_name FROM trainer_ops WHERE run_id = $1 AND step = $2 AND op = $3 AND model_id = $4 AND failed_at IS NULL',
        [args.runId, args.step, args.op, args.modelId],
      );
      if (live.rows.length > 0) return { seqId: live.rows[0].seq_id, checkpointName: live.rows[0].checkpoint_name };
      // ON CONFLICT: a concurrent attempt took this seq_id (try the next) or gave this op one (read it).
      await this.pool.query(
        `INSERT INTO trainer_ops (model_id, seq_id, run_id, step, op, checkpoint_name)
         SELECT $4, n.seq_id, $1, $2, $3,
                CASE WHEN $5::text IS NULL THEN NULL
                     WHEN EXISTS (SELECT 1 FROM trainer_ops WHERE run_id = $1 AND step = $2 AND op = $3 AND model_id = $4) THEN $5 || '-s' || n.seq_id
                     ELSE $5 END
           FROM (SELECT COALESCE(MAX(seq_id), 0) + 1 AS seq_id FROM trainer_ops WHERE model_id = $4) n
         ON CONFLICT DO NOTHING`,
        [args.runId, args.step, args.op, args.modelId, args.checkpointName ?? null],
      );
    }
    throw new Error(`run ${args.runId} step ${args.step}: no seq_id could be given to trainer op ${args.op} (model ${args.modelId})`);
  }

  /** Marks an op failed on the trainer (not applied): sent again, it gets a new seq_id. */
  async failTrainerOp(modelId: string, seqId: number, failure: string): Promise<void> {
    await this.pool.query('UPDATE trainer_ops SET failed_at = now(), failure = $3 WHERE model_id = $1 AND seq_id = $2 AND failed_at IS NULL', [modelId, seqId, failure]);
  }

  /** A step's trainer ops in seq_id order, failed ones included (for reports and tests). */
  async trainerOps(runId: string, step?: number): Promise<TrainerOpRecord[]> {
    const { rows } = await this.pool.query(
      `SELECT * FROM trainer_ops WHERE run_id = $1 AND ($2::int IS NULL OR step = $2) ORDER BY model_id, seq_id`,
      [runId, step ?? null],
    );
    return rows.map((r) => ({
      modelId: r.model_id, seqId: r.seq_id, step: r.step, op: r.op, checkpointName: r.checkpoint_name, failed: r.failed_at !== null, failure: r.failure,
    }));
  }

  async trainerStep(runId: string, step: number): Promise<TrainerStepRecord | null> {
    const { rows } = await this.pool.query('SELECT * FROM trainer_steps WHERE run_id = $1 AND step = $2 AND superseded_by IS NULL', [runId, step]);
    return rows.length === 0 ? null : trainerStepRecord(rows[0]);
  }

  /** Copies a run's profile versions up to `upToVersion` to another run (a fork's), keeping what it has. */
  async copyProfiles(fromRunId: string, toRunId: string, upToVersion: number): Promise<void> {
    await this.pool.query(
      `INSERT INTO profiles (run_id, version, policy_version, cells)
       SELECT $2, version, policy_version, cells FROM profiles WHERE run_id = $1 AND version <= $3
       ON CONFLICT (run_id, version) DO NOTHING`,
      [fromRunId, toRunId, upToVersion],
    );
  }

  async saveProfiles(runId: string, profiles: BehaviorProfiles): Promise<void> {
    await this.pool.query(
      `INSERT INTO profiles (run_id, version, policy_version, cells) VALUES ($1, $2, $3, $4)
       ON CONFLICT (run_id, version) DO NOTHING`,
      [runId, profiles.version, profiles.policyVersion, JSON.stringify({ priorStrength: profiles.priorStrength, baseHarnessId: profiles.baseHarnessId, cells: profiles.cells, kindCells: profiles.kindCells })],
    );
  }

  async profiles(runId: string, version: number): Promise<BehaviorProfiles | null> {
    const { rows } = await this.pool.query('SELECT * FROM profiles WHERE run_id = $1 AND version = $2', [runId, version]);
    if (rows.length === 0) return null;
    const r = rows[0];
    const stored = parseRow(StoredProfileCells, r.cells, `profiles row (run ${runId}, version ${version}): cells`);
    return { version: r.version, policyVersion: r.policy_version, ...stored };
  }

  /** Every profile version of a run, oldest first. */
  async profileVersions(runId: string): Promise<Array<{ version: number; policyVersion: string; createdAt: Date }>> {
    const { rows } = await this.pool.query('SELECT version, policy_version, created_at FROM profiles WHERE run_id = $1 ORDER BY version', [runId]);
    return rows.map((r) => ({ version: r.version, policyVersion: r.policy_version, createdAt: r.created_at }));
  }

  /** Stores a routing decision once; returns the stored one (an earlier attempt's, if any). */
  async recordRoutingDecision(runId: string, step: number, decision: RoutingDecision): Promise<RoutingDecision> {
    await this.pool.query(
      `INSERT INTO routing_decisions (run_id, step, task_id, task_kind, strategy, profile_version, failure_summary, failure_digest, failure_counts, votes, fallback, chosen, scores)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (run_id, step, task_id) WHERE superseded_by IS NULL DO NOTHING`,
      [
        runId, step, decision.taskId, decision.kind, decision.strategy, decision.profileVersion, decision.failureSummary,
        decision.failureDigest, JSON.stringify(decision.failureCounts), JSON.stringify(decision.votes), decision.fallback, decision.chosen, JSON.stringify(decision.scores),
      ],
    );
    const stored = await this.routingDecision(runId, step, decision.taskId);
    return stored!;
  }

  async routingDecision(runId: string, step: number, taskId: string): Promise<StoredRoutingDecision | null> {
    const { rows } = await this.pool.query('SELECT * FROM routing_decisions WHERE run_id = $1 AND step = $2 AND task_id = $3 AND superseded_by IS NULL', [runId, step, taskId]);
    return rows.length ? routingDecisionFromRow(rows[0]) : null;
  }

  async routingDecisions(runId: string): Promise<StoredRoutingDecision[]> {
    const { rows } = await this.pool.query('SELECT * FROM routing_decisions WHERE run_id = $1 AND superseded_by IS NULL ORDER BY step, task_id', [runId]);
    return rows.map(routingDecisionFromRow);
  }

  /** Fills in, for a step's decisions, how each chosen sibling's rescue rollouts did. */
  async settleRoutingDecisions(runId: string, step: number): Promise<void> {
    await this.pool.query(
      `UPDATE routing_decisions d SET outcome = COALESCE((
         SELECT jsonb_object_agg(x.harness_id, jsonb_build_object('rollouts', x.rollouts, 'successes', x.successes))
         FROM (SELECT t.harness_id, count(*)::int AS rollouts, (count(*) FILTER (WHERE t.success))::int AS successes
               FROM trajectories t
               WHERE t.run_id = d.run_id AND t.phase = 'train' AND t.step = d.step AND t.task_id = d.task_id AND t.role = 'rescue'
                 AND t.superseded_by IS NULL
               GROUP BY t.harness_id) x), '{}'::jsonb)
       WHERE d.run_id = $1 AND d.step = $2 AND d.superseded_by IS NULL`,
      [runId, step],
    );
  }

  async recordEvaluation(runId: string, summary: EvaluationSummary): Promise<void> {
    await this.pool.query(
      `INSERT INTO evaluations (run_id, after_steps, policy_version, profile_version, summary) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (run_id, after_steps) WHERE superseded_by IS NULL DO NOTHING`,
      [runId, summary.afterSteps, summary.policyVersion, summary.profileVersion, JSON.stringify(summary)],
    );
  }

  async evaluations(runId: string): Promise<EvaluationSummary[]> {
    const { rows } = await this.pool.query('SELECT after_steps, summary FROM evaluations WHERE run_id = $1 AND superseded_by IS NULL ORDER BY after_steps', [runId]);
    return rows.map((r) => parseRow(StoredEvaluationSummary, r.summary, `evaluations row (run ${runId}, after ${r.after_steps} steps): summary`));
  }

  async latestProfileVersion(runId: string): Promise<number | null> {
    const { rows } = await this.pool.query('SELECT max(version) AS v FROM profiles WHERE run_id = $1', [runId]);
    return rows[0].v;
  }

  async countTrajectories(runId: string, phase = 'train'): Promise<number> {
    const { rows } = await this.pool.query('SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1 AND phase = $2 AND superseded_by IS NULL', [runId, phase]);
    return rows[0].n;
  }
}

export function routingDecisionFromRow(r: QueryResultRow): StoredRoutingDecision {
  const columns = parseRow(
    StoredRoutingColumns,
    { strategy: r.strategy, failureCounts: r.failure_counts, votes: r.votes, scores: r.scores, outcome: r.outcome },
    `routing_decisions row (run ${r.run_id}, step ${r.step}, task ${r.task_id})`,
  );
  return {
    ...columns,
    step: r.step,
    taskId: r.task_id,
    kind: r.task_kind,
    profileVersion: r.profile_version,
    failureSummary: r.failure_summary,
    failureDigest: r.failure_digest,
    fallback: r.fallback,
    chosen: r.chosen,
  };
}

export function stepRecord(r: QueryResultRow): StepRecord {
  return {
    runId: r.run_id, step: r.step, policyVersion: r.policy_version, completedAt: r.completed_at,
    summary: parseRow(StoredStepSummary, r.summary, `steps row (run ${r.run_id}, step ${r.step}): summary`),
  };
}

function checkpointRecord(r: QueryResultRow): CheckpointRecord {
  return {
    runId: r.run_id, step: r.step, modelId: r.model_id, name: r.name, path: r.path, policyVersion: r.policy_version,
    createdAt: r.created_at, deletedAt: r.deleted_at,
  };
}

function restoreRecord(r: QueryResultRow): RestoreRecord {
  return {
    runId: r.run_id, restore: r.restore, kind: r.kind, atStep: r.at_step, fromRunId: r.from_run_id, fromStep: r.from_step,
    checkpointPath: r.checkpoint_path, lostModelId: r.lost_model_id, modelId: r.model_id, sessionId: r.session_id,
    policyVersion: r.policy_version, samplerPath: r.sampler_path, reason: r.reason, status: r.status,
    createdAt: r.created_at, completedAt: r.completed_at,
  };
}

function trainerStepRecord(r: QueryResultRow): TrainerStepRecord {
  const columns = parseRow(StoredTrainerStepColumns, { metrics: r.metrics, probe: r.probe ?? null }, `trainer_steps row (run ${r.run_id}, step ${r.step})`);
  return {
    runId: r.run_id, step: r.step, modelId: r.model_id, samplerPath: r.sampler_path, policyVersion: r.policy_version,
    datums: r.datums, responseTokens: r.response_tokens, ...columns,
  };
}

