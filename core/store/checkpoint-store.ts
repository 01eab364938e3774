/**
 * The checkpoints a run saved (checkpoints) and the restores of its trainer
 * model from them (trainer_restores), with what a restore supersedes.
 */
import type { Pool, QueryResultRow } from 'pg';
import { transaction } from './database';

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

export class CheckpointStore {
  constructor(private readonly pool: Pool) {}

  /** Records a saved checkpoint once. */
  async recordCheckpoint(c: {
    runId: string;
    step: number;
    modelId: string;
    name: string;
    path: string;
    policyVersion: string;
  }): Promise<void> {
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
    await this.pool.query(
      'UPDATE checkpoints SET deleted_at = now() WHERE run_id = $1 AND model_id = $2 AND name = $3 AND deleted_at IS NULL',
      [runId, modelId, name],
    );
  }

  // ------------------------------------------------------------- restores

  /**
   * Starts a restore once per lost model (a fork's load: once, as restore 0),
   * numbering restores 1, 2, ...: a retried restore gets the row the first
   * attempt wrote, with the model it was loading, if any.
   */
  async startRestore(r: {
    runId: string;
    kind: RestoreKind;
    atStep: number;
    fromRunId: string | null;
    fromStep: number | null;
    checkpointPath: string | null;
    lostModelId: string | null;
    reason: string;
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
  async completeRestore(r: {
    runId: string;
    restore: number;
    modelId: string;
    sessionId: string;
    policyVersion: string;
    samplerPath: string | null;
  }): Promise<RestoreRecord> {
    await transaction(this.pool, async (client) => {
      const { rows } = await client.query(
        `UPDATE trainer_restores SET status = 'done', completed_at = now(), model_id = $3, session_id = $4, policy_version = $5, sampler_path = $6
         WHERE run_id = $1 AND restore = $2 AND status = 'loading' RETURNING from_step, kind`,
        [r.runId, r.restore, r.modelId, r.sessionId, r.policyVersion, r.samplerPath],
      );
      if (rows.length === 0) return;
      await client.query('UPDATE runs SET trainer_model_id = $2, trainer_session_id = $3, updated_at = now() WHERE run_id = $1', [
        r.runId,
        r.modelId,
        r.sessionId,
      ]);
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
      await client.query(
        'UPDATE evaluations SET superseded_by = $2 WHERE run_id = $1 AND superseded_by IS NULL AND after_steps > $3 + 1',
        args,
      );
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
}

function checkpointRecord(r: QueryResultRow): CheckpointRecord {
  return {
    runId: r.run_id,
    step: r.step,
    modelId: r.model_id,
    name: r.name,
    path: r.path,
    policyVersion: r.policy_version,
    createdAt: r.created_at,
    deletedAt: r.deleted_at,
  };
}

function restoreRecord(r: QueryResultRow): RestoreRecord {
  return {
    runId: r.run_id,
    restore: r.restore,
    kind: r.kind,
    atStep: r.at_step,
    fromRunId: r.from_run_id,
    fromStep: r.from_step,
    checkpointPath: r.checkpoint_path,
    lostModelId: r.lost_model_id,
    modelId: r.model_id,
    sessionId: r.session_id,
    policyVersion: r.policy_version,
    samplerPath: r.sampler_path,
    reason: r.reason,
    status: r.status,
    createdAt: r.created_at,
    completedAt: r.completed_at,
  };
}
