/**
 * A run's steps (steps), what the trainer did in each (trainer_steps) and
 * the ops it sent the trainer, numbered so a retry is not applied twice
 * (trainer_ops).
 */
import type { Pool, QueryResultRow } from 'pg';
import type { AdapterProbe } from '../policy/adapter-probe';
import { parseRow, StoredStepSummary, StoredTrainerStepColumns } from './rows';

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

export class StepStore {
  constructor(private readonly pool: Pool) {}

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
    const { rows } = await this.pool.query('SELECT * FROM steps WHERE run_id = $1 AND superseded_by IS NULL ORDER BY step DESC LIMIT 1', [
      runId,
    ]);
    return rows.length === 0 ? null : stepRecord(rows[0]);
  }

  async recordTrainerStep(record: TrainerStepRecord): Promise<void> {
    await this.pool.query(
      `INSERT INTO trainer_steps (run_id, step, model_id, sampler_path, policy_version, datums, response_tokens, metrics, probe)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (run_id, step) WHERE superseded_by IS NULL DO NOTHING`,
      [
        record.runId,
        record.step,
        record.modelId,
        record.samplerPath,
        record.policyVersion,
        record.datums,
        record.responseTokens,
        JSON.stringify(record.metrics),
        record.probe === null ? null : JSON.stringify(record.probe),
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
    await this.pool.query(
      'UPDATE trainer_ops SET failed_at = now(), failure = $3 WHERE model_id = $1 AND seq_id = $2 AND failed_at IS NULL',
      [modelId, seqId, failure],
    );
  }

  /** A step's trainer ops in seq_id order, failed ones included (for reports and tests). */
  async trainerOps(runId: string, step?: number): Promise<TrainerOpRecord[]> {
    const { rows } = await this.pool.query(
      `SELECT * FROM trainer_ops WHERE run_id = $1 AND ($2::int IS NULL OR step = $2) ORDER BY model_id, seq_id`,
      [runId, step ?? null],
    );
    return rows.map((r) => ({
      modelId: r.model_id,
      seqId: r.seq_id,
      step: r.step,
      op: r.op,
      checkpointName: r.checkpoint_name,
      failed: r.failed_at !== null,
      failure: r.failure,
    }));
  }

  /**
   * The steps the trainer recorded sampler weights for (trainer_steps, the live rows: a restore supersedes the
   * steps it redoes). Not the `steps` table: a step can be trained before its summary is stored.
   */
  async trainedSteps(runId: string): Promise<number[]> {
    const { rows } = await this.pool.query<{ step: number }>(
      'SELECT step FROM trainer_steps WHERE run_id = $1 AND superseded_by IS NULL ORDER BY step',
      [runId],
    );
    return rows.map((r) => r.step);
  }

  async trainerStep(runId: string, step: number): Promise<TrainerStepRecord | null> {
    const { rows } = await this.pool.query('SELECT * FROM trainer_steps WHERE run_id = $1 AND step = $2 AND superseded_by IS NULL', [
      runId,
      step,
    ]);
    return rows.length === 0 ? null : trainerStepRecord(rows[0]);
  }
}

export function stepRecord(r: QueryResultRow): StepRecord {
  return {
    runId: r.run_id,
    step: r.step,
    policyVersion: r.policy_version,
    completedAt: r.completed_at,
    summary: parseRow(StoredStepSummary, r.summary, `steps row (run ${r.run_id}, step ${r.step}): summary`),
  };
}

function trainerStepRecord(r: QueryResultRow): TrainerStepRecord {
  const columns = parseRow(
    StoredTrainerStepColumns,
    { metrics: r.metrics, probe: r.probe ?? null },
    `trainer_steps row (run ${r.run_id}, step ${r.step})`,
  );
  return {
    runId: r.run_id,
    step: r.step,
    modelId: r.model_id,
    samplerPath: r.sampler_path,
    policyVersion: r.policy_version,
    datums: r.datums,
    responseTokens: r.response_tokens,
    ...columns,
  };
}
