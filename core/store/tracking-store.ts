/**
 * What of each run has been logged to each experiment tracker
 * (tracking_exports, migration ..._tracking.sql), and the lock that keeps two
 * exports of one run from running at once (a step's export still running
 * when the next step's starts).
 */
import { z } from 'zod';
import type { Pool } from 'pg';
import { parseRow } from './rows';

export interface TrackingExport {
  runId: string;
  tracker: string;
  externalRunId: string | null;
  experimentId: string | null;
  paramsLogged: boolean;
  /** step -> completed_at (ms) of the steps row logged. */
  loggedSteps: Record<string, number>;
  /** after_steps -> created_at (ms) of the evaluations row logged. */
  loggedEvaluations: Record<string, number>;
  reportLogged: boolean;
  /** How the tracker's run was ended; null while the run goes on. */
  endedAs: RunEnd | null;
  lastError: string | null;
  lastErrorAt: Date | null;
  updatedAt: Date;
}

/** How a tracked run ends: the run returned, or failed. */
export type RunEnd = 'FINISHED' | 'FAILED';

const Logged = z.record(z.string(), z.number());
/** The advisory lock space of tracking exports (the second key is the run and tracker). */
const LOCK_SPACE = 'harness_s.tracking_exports';

export class TrackingStore {
  constructor(private readonly pool: Pool) {}

  /** The run's export to `tracker`, made (empty) when there is none. */
  async export(runId: string, tracker: string): Promise<TrackingExport> {
    await this.pool.query('INSERT INTO tracking_exports (run_id, tracker) VALUES ($1, $2) ON CONFLICT DO NOTHING', [runId, tracker]);
    return (await this.find(runId, tracker))!;
  }

  async find(runId: string, tracker: string): Promise<TrackingExport | null> {
    const { rows } = await this.pool.query('SELECT * FROM tracking_exports WHERE run_id = $1 AND tracker = $2', [runId, tracker]);
    if (rows.length === 0) return null;
    const r = rows[0];
    const where = `tracking_exports row (run ${runId}, tracker ${tracker})`;
    return {
      runId: r.run_id,
      tracker: r.tracker,
      externalRunId: r.external_run_id,
      experimentId: r.experiment_id,
      paramsLogged: r.params_logged,
      loggedSteps: parseRow(Logged, r.logged_steps, `${where}: logged_steps`),
      loggedEvaluations: parseRow(Logged, r.logged_evaluations, `${where}: logged_evaluations`),
      reportLogged: r.report_logged,
      endedAs: r.ended_as,
      lastError: r.last_error,
      lastErrorAt: r.last_error_at,
      updatedAt: r.updated_at,
    };
  }

  /** The tracker's run, stored once: a second call keeps the first id. */
  async setExternalRun(runId: string, tracker: string, externalRunId: string, experimentId: string): Promise<void> {
    await this.pool.query(
      `UPDATE tracking_exports SET external_run_id = $3, experiment_id = $4, updated_at = now()
       WHERE run_id = $1 AND tracker = $2 AND external_run_id IS NULL`,
      [runId, tracker, externalRunId, experimentId],
    );
  }

  async markParamsLogged(runId: string, tracker: string): Promise<void> {
    await this.pool.query('UPDATE tracking_exports SET params_logged = true, updated_at = now() WHERE run_id = $1 AND tracker = $2', [
      runId,
      tracker,
    ]);
  }

  /** Adds steps (step -> completed_at ms) to what was logged. */
  async markStepsLogged(runId: string, tracker: string, steps: Record<string, number>): Promise<void> {
    await this.pool.query(
      'UPDATE tracking_exports SET logged_steps = logged_steps || $3::jsonb, updated_at = now() WHERE run_id = $1 AND tracker = $2',
      [runId, tracker, JSON.stringify(steps)],
    );
  }

  async markEvaluationsLogged(runId: string, tracker: string, evaluations: Record<string, number>): Promise<void> {
    await this.pool.query(
      'UPDATE tracking_exports SET logged_evaluations = logged_evaluations || $3::jsonb, updated_at = now() WHERE run_id = $1 AND tracker = $2',
      [runId, tracker, JSON.stringify(evaluations)],
    );
  }

  async markReportLogged(runId: string, tracker: string): Promise<void> {
    await this.pool.query('UPDATE tracking_exports SET report_logged = true, updated_at = now() WHERE run_id = $1 AND tracker = $2', [
      runId,
      tracker,
    ]);
  }

  async markEnded(runId: string, tracker: string, end: RunEnd): Promise<void> {
    await this.pool.query('UPDATE tracking_exports SET ended_as = $3, updated_at = now() WHERE run_id = $1 AND tracker = $2', [
      runId,
      tracker,
      end,
    ]);
  }

  /** The last failure to reach the tracker, or null once a call went through. */
  async setLastError(runId: string, tracker: string, error: string | null): Promise<void> {
    await this.pool.query(
      `INSERT INTO tracking_exports (run_id, tracker, last_error, last_error_at) VALUES ($1, $2, $3, CASE WHEN $3::text IS NULL THEN NULL ELSE now() END)
       ON CONFLICT (run_id, tracker) DO UPDATE SET last_error = EXCLUDED.last_error, last_error_at = EXCLUDED.last_error_at, updated_at = now()`,
      [runId, tracker, error],
    );
  }

  /** When each live evaluation of the run was recorded (after_steps -> created_at): the timestamp of its metric points. */
  async evaluationTimes(runId: string): Promise<Map<number, Date>> {
    const { rows } = await this.pool.query('SELECT after_steps, created_at FROM evaluations WHERE run_id = $1 AND superseded_by IS NULL', [
      runId,
    ]);
    return new Map(rows.map((r) => [r.after_steps as number, r.created_at as Date]));
  }

  /**
   * Runs `work` holding the run's export lock for `tracker` (a session
   * advisory lock); waits up to `waitMs` for another holder, and returns
   * null without running it when the lock stays taken.
   */
  async withExportLock<T>(runId: string, tracker: string, waitMs: number, work: () => Promise<T>): Promise<{ result: T } | null> {
    const client = await this.pool.connect();
    const key = [LOCK_SPACE, `${tracker}:${runId}`];
    try {
      const deadline = Date.now() + waitMs;
      for (;;) {
        const { rows } = await client.query('SELECT pg_try_advisory_lock(hashtext($1), hashtext($2)) AS got', key);
        if (rows[0].got) break;
        if (Date.now() >= deadline) return null;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      try {
        return { result: await work() };
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtext($1), hashtext($2))', key);
      }
    } finally {
      client.release();
    }
  }
}
