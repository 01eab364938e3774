/**
 * The rollouts a run stored (trajectories), written once per key and read
 * back by group while a step runs.
 */
import type { Pool } from 'pg';
import type { Trajectory } from '../policy/trajectory';
import type { RolloutSummary } from '../rl/groups';
import { storableMessage } from './rows';

export interface TrajectoryKey {
  phase: string;
  step: number;
  taskId: string;
  harnessId: string;
  sample: number;
}

export class TrajectoryStore {
  constructor(private readonly pool: Pool) {}

  /** Stores trajectories not stored yet; returns those it stored (one stored before, by an earlier attempt, is kept as it was). */
  async insertTrajectories(
    runId: string,
    phase: string,
    step: number,
    role: string,
    trajectories: readonly Trajectory[],
  ): Promise<Trajectory[]> {
    if (trajectories.length === 0) return [];
    const columns = 20;
    const values: unknown[] = [];
    const tuples = trajectories.map((t, i) => {
      values.push(
        runId,
        phase,
        step,
        t.taskId,
        t.harnessId,
        t.sample,
        role,
        t.taskKind,
        t.policyVersion,
        t.reward,
        t.success,
        t.failureType,
        t.turns,
        t.tokens,
        t.latencyMs,
        JSON.stringify(t.messages.map(storableMessage)),
        JSON.stringify(t.samples),
        t.promptTokens,
        t.completionTokens,
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
  async rolloutSummaries(
    runId: string,
    phase: string,
    step: number,
    taskId: string,
    harnessIds: readonly string[],
  ): Promise<RolloutSummary[]> {
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

  /** The rollouts stored at one step of a phase so far, superseded ones included (a bench waiting for a step to be under way). */
  async countStepTrajectories(runId: string, phase: string, step: number): Promise<number> {
    const { rows } = await this.pool.query('SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1 AND phase = $2 AND step = $3', [
      runId,
      phase,
      step,
    ]);
    return rows[0].n;
  }

  async countTrajectories(runId: string, phase = 'train'): Promise<number> {
    const { rows } = await this.pool.query(
      'SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1 AND phase = $2 AND superseded_by IS NULL',
      [runId, phase],
    );
    return rows[0].n;
  }

  /** Eval episodes of these runs, counted by harness and task kind (what `eval --route-from` ranks harnesses by). */
  async evalSuccessByKind(
    runIds: readonly string[],
  ): Promise<Array<{ harnessId: string; taskKind: string; total: number; passed: number }>> {
    const { rows } = await this.pool.query(
      `SELECT harness_id, task_kind, count(*)::int AS total, count(*) FILTER (WHERE success)::int AS passed FROM trajectories
       WHERE run_id = ANY($1) AND phase = 'eval' AND superseded_by IS NULL GROUP BY harness_id, task_kind ORDER BY harness_id, task_kind`,
      [runIds],
    );
    return rows.map((r) => ({ harnessId: r.harness_id, taskKind: r.task_kind, total: r.total, passed: r.passed }));
  }
}
