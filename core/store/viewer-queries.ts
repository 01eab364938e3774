/**
 * What the trajectory viewer reads from the run store, page by page. Every
 * query reads one page through an index (runs by creation, steps by run,
 * trajectories by run and step or by run and task id), so a run with
 * millions of rollouts opens as fast as a small one; nothing here writes.
 */
import type { Pool, QueryResultRow } from 'pg';
import { z } from 'zod';
import type { ChatMessage, HarnessIntervention, TokenSample } from '../policy/trajectory';
import { UserError } from '../errors';
import { parseRow } from './rows';
import { stepRecord, type StepRecord } from './step-store';
import { routingDecisionFromRow, type StoredRoutingDecision } from './routing-store';

export interface RunRow {
  runId: string;
  name: string;
  env: string;
  config: unknown;
  createdAt: Date;
  parent: { runId: string; step: number } | null;
}

/** One rollout without its messages and tokens: what lists show. */
export interface RolloutRow {
  phase: string;
  step: number;
  taskId: string;
  taskKind: string;
  harnessId: string;
  sample: number;
  role: string;
  policyVersion: string;
  reward: number;
  success: boolean;
  failureType: string | null;
  turns: number;
  tokens: number;
}

/** A rollout whole: its conversation, tokens and what the harness did. */
export interface TrajectoryRow extends RolloutRow {
  messages: ChatMessage[];
  samples: TokenSample[];
  interventions: HarnessIntervention[] | null;
  promptTokens: number | null;
  completionTokens: number | null;
  latencyMs: number;
  createdAt: Date;
}

export interface RolloutKey {
  phase: string;
  step: number;
  taskId: string;
  harnessId: string;
  sample: number;
}

/** Filters of the run's rollout search; each absent one matches all. */
export interface RolloutFilter {
  phase?: string;
  role?: string;
  kind?: string;
  harness?: string;
  outcome?: 'success' | 'failure';
  failureType?: string;
  /** A task id, or the start of one. */
  task?: string;
}

const StoredMessages = z.array(z.object({ role: z.enum(['system', 'user', 'assistant', 'tool']), content: z.string() }).passthrough());
const StoredSamples = z.array(
  z.object({
    promptIds: z.array(z.number()),
    responseIds: z.array(z.number()),
    responseMask: z.array(z.number()),
    responseLogprobs: z.array(z.number()),
  }),
);
const StoredInterventions = z
  .array(
    z.object({ message: z.number().int(), kind: z.enum(['context', 'scaffold', 'repair', 'refusal', 'observation']), detail: z.string() }),
  )
  .nullable();

const ROLLOUT_COLUMNS =
  'phase, step, task_id, task_kind, harness_id, sample, role, policy_version, reward, success, failure_type, turns, tokens';

function rolloutRow(r: QueryResultRow): RolloutRow {
  return {
    phase: r.phase,
    step: r.step,
    taskId: r.task_id,
    taskKind: r.task_kind,
    harnessId: r.harness_id,
    sample: r.sample,
    role: r.role,
    policyVersion: r.policy_version,
    reward: r.reward,
    success: r.success,
    failureType: r.failure_type,
    turns: r.turns,
    tokens: r.tokens,
  };
}

/** `LIKE` pattern for ids starting with `prefix`. */
function prefixPattern(prefix: string): string {
  return `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export class ViewerQueries {
  constructor(private readonly pool: Pool) {}

  /** Fails with what to do when the database is out of reach or holds no run store yet (the viewer reads; it does not migrate). */
  async check(where: string): Promise<void> {
    try {
      await this.pool.query('SELECT 1 FROM runs LIMIT 1');
    } catch (err) {
      const e = err as Error & { code?: string };
      if (e.code === '42P01')
        throw new UserError(
          `the database at ${where} holds no run store yet: start a worker or \`harness-s dev\` (they apply the migrations), or set DATABASE_URL to the run store's database`,
        );
      throw new UserError(`cannot read the run store at ${where}: ${e.message}. Set DATABASE_URL to the run store's database`);
    }
  }

  /** Runs newest first, one page; `more` when there are older ones. */
  async listRuns(offset: number, limit: number): Promise<{ runs: RunRow[]; more: boolean }> {
    const { rows } = await this.pool.query(
      'SELECT run_id, name, env, config, created_at, parent_run_id, parent_step FROM runs ORDER BY created_at DESC, run_id LIMIT $1 OFFSET $2',
      [limit + 1, offset],
    );
    return { runs: rows.slice(0, limit).map(runRow), more: rows.length > limit };
  }

  async run(runId: string): Promise<RunRow | null> {
    const { rows } = await this.pool.query(
      'SELECT run_id, name, env, config, created_at, parent_run_id, parent_step FROM runs WHERE run_id = $1',
      [runId],
    );
    return rows.length === 0 ? null : runRow(rows[0]);
  }

  /** Base success per step of each run, in step order (the runs page's sparklines). */
  async baseSuccessByRun(runIds: readonly string[]): Promise<Map<string, number[]>> {
    const { rows } = await this.pool.query(
      `SELECT run_id, array_agg((summary->>'baseSuccessRate')::float8 ORDER BY step) AS rates
       FROM steps WHERE run_id = ANY($1) AND superseded_by IS NULL GROUP BY run_id`,
      [runIds],
    );
    return new Map(rows.map((r) => [r.run_id, r.rates]));
  }

  /** A page of a run's steps in order, and how many it has. */
  async steps(runId: string, offset: number, limit: number): Promise<{ steps: StepRecord[]; total: number }> {
    const [page, count] = await Promise.all([
      this.pool.query('SELECT * FROM steps WHERE run_id = $1 AND superseded_by IS NULL ORDER BY step LIMIT $2 OFFSET $3', [
        runId,
        limit,
        offset,
      ]),
      this.pool.query('SELECT count(*)::int AS n FROM steps WHERE run_id = $1 AND superseded_by IS NULL', [runId]),
    ]);
    return { steps: page.rows.map(stepRecord), total: count.rows[0].n };
  }

  async step(runId: string, step: number): Promise<StepRecord | null> {
    const { rows } = await this.pool.query('SELECT * FROM steps WHERE run_id = $1 AND step = $2 AND superseded_by IS NULL', [runId, step]);
    return rows.length === 0 ? null : stepRecord(rows[0]);
  }

  /** Every rollout of a training step, without messages (a step's groups: its batch and rescues). */
  async stepRollouts(runId: string, step: number): Promise<RolloutRow[]> {
    const { rows } = await this.pool.query(
      `SELECT ${ROLLOUT_COLUMNS} FROM trajectories WHERE run_id = $1 AND phase = 'train' AND step = $2 AND superseded_by IS NULL
       ORDER BY task_id, role, harness_id, sample`,
      [runId, step],
    );
    return rows.map(rolloutRow);
  }

  async routingDecisions(runId: string, step: number): Promise<StoredRoutingDecision[]> {
    const { rows } = await this.pool.query(
      'SELECT * FROM routing_decisions WHERE run_id = $1 AND step = $2 AND superseded_by IS NULL ORDER BY task_id',
      [runId, step],
    );
    return rows.map(routingDecisionFromRow);
  }

  async trajectory(runId: string, key: RolloutKey): Promise<TrajectoryRow | null> {
    const { rows } = await this.pool.query(
      `SELECT ${ROLLOUT_COLUMNS}, messages, samples, interventions, prompt_tokens, completion_tokens, latency_ms, created_at FROM trajectories
       WHERE run_id = $1 AND phase = $2 AND step = $3 AND task_id = $4 AND harness_id = $5 AND sample = $6 AND superseded_by IS NULL`,
      [runId, key.phase, key.step, key.taskId, key.harnessId, key.sample],
    );
    if (rows.length === 0) return null;
    const r = rows[0];
    const where = `trajectories row (run ${runId}, ${key.phase} step ${key.step}, task ${key.taskId}, harness ${key.harnessId}, sample ${key.sample})`;
    return {
      ...rolloutRow(r),
      messages: parseRow(StoredMessages, r.messages, `${where}: messages`) as ChatMessage[],
      samples: parseRow(StoredSamples, r.samples, `${where}: samples`),
      interventions: parseRow(StoredInterventions, r.interventions, `${where}: interventions`),
      promptTokens: r.prompt_tokens,
      completionTokens: r.completion_tokens,
      latencyMs: r.latency_ms,
      createdAt: r.created_at,
    };
  }

  /**
   * One page of a run's rollouts matching `filter`, in (phase, step, task,
   * harness, sample) order, after `after` (keyset pagination: a deep page
   * costs what the first does); `next` is the last row's key when there are more.
   */
  async searchRollouts(
    runId: string,
    filter: RolloutFilter,
    after: RolloutKey | null,
    limit: number,
  ): Promise<{ rollouts: RolloutRow[]; next: RolloutKey | null }> {
    const where = ['run_id = $1', 'superseded_by IS NULL'];
    const values: unknown[] = [runId];
    const add = (clause: (n: string) => string, value: unknown) => {
      values.push(value);
      where.push(clause(`$${values.length}`));
    };
    if (filter.phase) add((n) => `phase = ${n}`, filter.phase);
    if (filter.role) add((n) => `role = ${n}`, filter.role);
    if (filter.kind) add((n) => `task_kind = ${n}`, filter.kind);
    if (filter.harness) add((n) => `harness_id = ${n}`, filter.harness);
    if (filter.outcome) add((n) => `success = ${n}`, filter.outcome === 'success');
    if (filter.failureType) add((n) => `failure_type = ${n}`, filter.failureType);
    if (filter.task) add((n) => `task_id LIKE ${n}`, prefixPattern(filter.task));
    if (after) {
      const n = values.length;
      values.push(after.phase, after.step, after.taskId, after.harnessId, after.sample);
      where.push(`(phase, step, task_id, harness_id, sample) > ($${n + 1}, $${n + 2}, $${n + 3}, $${n + 4}, $${n + 5})`);
    }
    values.push(limit + 1);
    const { rows } = await this.pool.query(
      `SELECT ${ROLLOUT_COLUMNS} FROM trajectories WHERE ${where.join(' AND ')}
       ORDER BY phase, step, task_id, harness_id, sample LIMIT $${values.length}`,
      values,
    );
    const rollouts = rows.slice(0, limit).map(rolloutRow);
    const last = rollouts[rollouts.length - 1];
    return { rollouts, next: rows.length > limit ? keyOf(last) : null };
  }

  /** The values each filter can take in a run (its kinds, harnesses, failure types, phases), read from its steps' rollouts. */
  async filterValues(runId: string): Promise<{ kinds: string[]; harnesses: string[]; failureTypes: string[] }> {
    // From the run's first stored step and its routing decisions: cheap, and every kind and harness appears early.
    const { rows } = await this.pool.query(
      `SELECT array(SELECT DISTINCT task_kind FROM trajectories WHERE run_id = $1 AND phase = 'train' AND step = (SELECT min(step) FROM steps WHERE run_id = $1) ORDER BY 1) AS kinds,
              array(SELECT DISTINCT unnest(chosen) FROM routing_decisions WHERE run_id = $1 ORDER BY 1) AS siblings,
              array(SELECT DISTINCT harness_id FROM trajectories WHERE run_id = $1 AND phase = 'train' AND step = (SELECT min(step) FROM steps WHERE run_id = $1) ORDER BY 1) AS base`,
      [runId],
    );
    const r = rows[0];
    return {
      kinds: r.kinds,
      harnesses: [...new Set<string>([...r.base, ...r.siblings])].sort(),
      failureTypes: ['format_error', 'execution_error', 'wrong_answer', 'turn_limit', 'policy_error'],
    };
  }

  /**
   * The same task three ways: under the base harness at its first training
   * step (a failed rollout where there is one), under the sibling that rescued it (its first successful rescue, else
   * its first rescue), and under the base harness at the end (its last base
   * rollout, training or evaluation).
   */
  async sideBySide(
    runId: string,
    taskId: string,
  ): Promise<{ first: RolloutKey | null; rescue: RolloutKey | null; last: RolloutKey | null }> {
    const one = async (sql: string, values: unknown[]) => {
      const { rows } = await this.pool.query(sql, values);
      return rows.length === 0 ? null : keyOf(rolloutRow(rows[0]));
    };
    const first = await one(
      `SELECT ${ROLLOUT_COLUMNS} FROM trajectories WHERE run_id = $1 AND task_id = $2 AND phase = 'train' AND role = 'base' AND superseded_by IS NULL
       ORDER BY step, success, sample LIMIT 1`,
      [runId, taskId],
    );
    const rescue = await one(
      `SELECT ${ROLLOUT_COLUMNS} FROM trajectories WHERE run_id = $1 AND task_id = $2 AND phase = 'train' AND role = 'rescue' AND superseded_by IS NULL
       ORDER BY success DESC, step, harness_id, sample LIMIT 1`,
      [runId, taskId],
    );
    const baseHarness = first?.harnessId ?? null;
    const last =
      baseHarness === null
        ? null
        : await one(
            `SELECT ${ROLLOUT_COLUMNS} FROM trajectories WHERE run_id = $1 AND task_id = $2 AND harness_id = $3 AND phase IN ('train', 'eval') AND superseded_by IS NULL
       ORDER BY step DESC, (phase = 'eval') DESC, sample LIMIT 1`,
            [runId, taskId, baseHarness],
          );
    return { first, rescue, last };
  }
}

export function keyOf(r: RolloutRow): RolloutKey {
  return { phase: r.phase, step: r.step, taskId: r.taskId, harnessId: r.harnessId, sample: r.sample };
}

function runRow(r: QueryResultRow): RunRow {
  return {
    runId: r.run_id,
    name: r.name,
    env: r.env,
    config: r.config,
    createdAt: r.created_at,
    parent: r.parent_run_id === null ? null : { runId: r.parent_run_id, step: r.parent_step },
  };
}
