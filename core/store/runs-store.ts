/**
 * The runs (runs, run_config_changes): what each run is, its config over
 * time, its trainer model and whether it finished.
 */
import type { Pool } from 'pg';
import { UserError } from '../errors';
import { transaction } from './database';

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

export class RunIdInUseError extends UserError {
  override name = 'RunIdInUseError';
  constructor(runId: string) {
    super(
      `run id ${runId} was already used by another run, whose results are stored under it; start with another id, or continue that run with \`harness-s run recover ${runId}\``,
    );
  }
}

export class RunsStore {
  constructor(private readonly pool: Pool) {}

  /**
   * Registers a run for an execution chain (`incarnation`). A chain may register
   * again (activity retries, continue-as-new). Another chain may take the run
   * over only when it says it continues it (`takeOver`: recovery); otherwise
   * the id is refused, since its stored results belong to another run.
   */
  async registerRun(run: {
    runId: string;
    name: string;
    env: string;
    config: unknown;
    incarnation: string;
    takeOver: boolean;
    poolHash?: string | null;
  }): Promise<void> {
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
    await transaction(this.pool, async (client) => {
      const { rowCount } = await client.query('UPDATE runs SET config = $2, updated_at = now() WHERE run_id = $1', [
        runId,
        JSON.stringify(config),
      ]);
      if (rowCount === 0) throw new Error(`run ${runId} is not registered in the run store`);
      await client.query(
        `INSERT INTO run_config_changes (run_id, from_step, config) VALUES ($1, $2, $3)
         ON CONFLICT (run_id, from_step) DO UPDATE SET config = EXCLUDED.config, created_at = now()`,
        [runId, fromStep, JSON.stringify(config)],
      );
    });
  }

  /** The config changes of a run: from which step each config applied. */
  async configChanges(runId: string): Promise<Array<{ fromStep: number; config: unknown }>> {
    const { rows } = await this.pool.query('SELECT from_step, config FROM run_config_changes WHERE run_id = $1 ORDER BY from_step', [
      runId,
    ]);
    return rows.map((r) => ({ fromStep: r.from_step, config: r.config }));
  }

  async getRun(runId: string): Promise<StoredRun | null> {
    const { rows } = await this.pool.query('SELECT * FROM runs WHERE run_id = $1', [runId]);
    if (rows.length === 0) return null;
    const r = rows[0];
    return {
      runId: r.run_id,
      name: r.name,
      env: r.env,
      config: r.config,
      trainerModelId: r.trainer_model_id,
      trainerSessionId: r.trainer_session_id,
      poolHash: r.pool_hash,
      parent: r.parent_run_id === null ? null : { runId: r.parent_run_id, step: r.parent_step },
      createdAt: r.created_at,
      finishedAt: r.finished_at ?? null,
    };
  }

  /** Records a fork's parent once (a retried prepareRun finds it set). */
  async setParent(runId: string, parent: { runId: string; step: number }): Promise<void> {
    await this.pool.query('UPDATE runs SET parent_run_id = $2, parent_step = $3 WHERE run_id = $1 AND parent_run_id IS NULL', [
      runId,
      parent.runId,
      parent.step,
    ]);
  }

  /** Deletes a run and every row stored under it (a bench's scratch run). */
  async deleteRun(runId: string): Promise<void> {
    await this.pool.query('DELETE FROM runs WHERE run_id = $1', [runId]);
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
}
