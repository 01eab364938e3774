/**
 * The evolution records in PostgreSQL (migration ..._harness-evolution.sql):
 * evolutions, their proposals, candidates, validation rollouts and selection
 * decisions, and the frozen pools. Every write is keyed and keeps the first
 * record (ON CONFLICT DO NOTHING), so an activity that runs twice records once.
 */
import type { Pool, QueryResultRow } from 'pg';
import type { ChatMessage, FailureType } from '../policy/trajectory';
import { UserError } from '../errors';
import { contentHash } from '../harness/frozen-pool';
import { storableMessage } from './rows';
import type { StoredCandidate } from '../evolution/freeze';

export type { StoredCandidate };

export class EvolutionNameInUseError extends UserError {
  override name = 'EvolutionNameInUseError';
}

export interface StoredEvolution {
  evolutionId: string;
  env: string;
  config: unknown;
  baseSpec: Record<string, unknown>;
  devTasks: Array<{ taskId: string; kind: string }>;
  poolHash: string | null;
  createdAt: Date;
  finishedAt: Date | null;
}

export interface EvolutionRollout {
  sample: number;
  taskKind: string;
  success: boolean;
  failureType: FailureType | null;
  turns: number;
  tokens: number;
  messages: ChatMessage[];
}

export interface StoredProposal {
  round: number;
  direction: string;
  slot: number;
  attempt: number;
  proposer: string;
  messages: ChatMessage[];
  answer: string;
  verdict: 'accepted' | 'invalid' | 'off_direction';
  reason: string | null;
  createdAt: Date;
}

export interface StoredPool {
  poolHash: string;
  env: string;
  evolutionId: string | null;
  manifest: unknown;
  specs: Record<string, unknown>;
  createdAt: Date;
}

/** jsonb keeps no key order: compare canonical JSON. */
const candidateOf = (r: QueryResultRow): StoredCandidate => ({
  candidateId: r.candidate_id,
  round: r.round,
  direction: r.direction,
  slot: r.slot,
  parent: r.parent,
  spec: r.spec,
  version: r.version,
});

const sameJson = (a: unknown, b: unknown) => contentHash(a) === contentHash(b);

export class EvolutionStore {
  constructor(private readonly pool: Pool) {}

  /**
   * Registers an evolution under its name, or finds it registered: a second
   * start with the same config resumes it; another config under that name is refused.
   */
  async registerEvolution(e: {
    evolutionId: string;
    env: string;
    config: unknown;
    baseSpec: unknown;
    devTasks: unknown;
  }): Promise<StoredEvolution> {
    await this.pool.query(
      `INSERT INTO evolutions (evolution_id, env, config, base_spec, dev_tasks) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (evolution_id) DO NOTHING`,
      [e.evolutionId, e.env, JSON.stringify(e.config), JSON.stringify(e.baseSpec), JSON.stringify(e.devTasks)],
    );
    const stored = (await this.getEvolution(e.evolutionId))!;
    if (!sameJson(stored.config, e.config) || !sameJson(stored.baseSpec, e.baseSpec)) {
      throw new EvolutionNameInUseError(
        `an evolution named '${e.evolutionId}' is already stored with another config or base harness; ` +
          'start this one under another name, or resume that one with its own config (`harness-s pool show` lists what it froze)',
      );
    }
    return stored;
  }

  async getEvolution(evolutionId: string): Promise<StoredEvolution | null> {
    const { rows } = await this.pool.query('SELECT * FROM evolutions WHERE evolution_id = $1', [evolutionId]);
    if (rows.length === 0) return null;
    const r = rows[0];
    return {
      evolutionId: r.evolution_id,
      env: r.env,
      config: r.config,
      baseSpec: r.base_spec,
      devTasks: r.dev_tasks,
      poolHash: r.pool_hash,
      createdAt: r.created_at,
      finishedAt: r.finished_at,
    };
  }

  /** Stores rollouts not stored yet; returns how many it stored. */
  async insertRollouts(
    evolutionId: string,
    phase: string,
    candidateId: string,
    taskId: string,
    rollouts: readonly EvolutionRollout[],
  ): Promise<number> {
    let stored = 0;
    for (const r of rollouts) {
      const { rowCount } = await this.pool.query(
        `INSERT INTO evolution_rollouts (evolution_id, phase, candidate_id, task_id, sample, task_kind, success, failure_type, turns, tokens, messages)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         ON CONFLICT (evolution_id, phase, candidate_id, task_id, sample) DO NOTHING`,
        [
          evolutionId,
          phase,
          candidateId,
          taskId,
          r.sample,
          r.taskKind,
          r.success,
          r.failureType,
          r.turns,
          r.tokens,
          JSON.stringify(r.messages.map(storableMessage)),
        ],
      );
      stored += rowCount ?? 0;
    }
    return stored;
  }

  /** The stored rollouts of one (phase, harness, task) group, without messages. */
  async groupRollouts(
    evolutionId: string,
    phase: string,
    candidateId: string,
    taskId: string,
  ): Promise<Array<Omit<EvolutionRollout, 'messages'>>> {
    const { rows } = await this.pool.query(
      `SELECT sample, task_kind, success, failure_type, turns, tokens FROM evolution_rollouts
       WHERE evolution_id = $1 AND phase = $2 AND candidate_id = $3 AND task_id = $4 ORDER BY sample`,
      [evolutionId, phase, candidateId, taskId],
    );
    return rows.map((r) => ({
      sample: r.sample,
      taskKind: r.task_kind,
      success: r.success,
      failureType: r.failure_type,
      turns: r.turns,
      tokens: r.tokens,
    }));
  }

  /** Failed rollouts of a harness on some tasks, in (task, sample) order, with their messages. */
  async failedRollouts(
    evolutionId: string,
    phase: string,
    candidateId: string,
    taskIds: readonly string[],
  ): Promise<Array<EvolutionRollout & { taskId: string }>> {
    const { rows } = await this.pool.query(
      `SELECT task_id, sample, task_kind, success, failure_type, turns, tokens, messages FROM evolution_rollouts
       WHERE evolution_id = $1 AND phase = $2 AND candidate_id = $3 AND task_id = ANY($4) AND NOT success ORDER BY task_id, sample`,
      [evolutionId, phase, candidateId, taskIds],
    );
    return rows.map((r) => ({
      taskId: r.task_id,
      sample: r.sample,
      taskKind: r.task_kind,
      success: r.success,
      failureType: r.failure_type,
      turns: r.turns,
      tokens: r.tokens,
      messages: r.messages,
    }));
  }

  async proposals(evolutionId: string, where: { round?: number; direction?: string; slot?: number } = {}): Promise<StoredProposal[]> {
    const { rows } = await this.pool.query(
      `SELECT * FROM evolution_proposals WHERE evolution_id = $1
         AND ($2::int IS NULL OR round = $2) AND ($3::text IS NULL OR direction = $3) AND ($4::int IS NULL OR slot = $4)
       ORDER BY round, direction, slot, attempt`,
      [evolutionId, where.round ?? null, where.direction ?? null, where.slot ?? null],
    );
    return rows.map((r) => ({
      round: r.round,
      direction: r.direction,
      slot: r.slot,
      attempt: r.attempt,
      proposer: r.proposer,
      messages: r.messages,
      answer: r.answer,
      verdict: r.verdict,
      reason: r.reason,
      createdAt: r.created_at,
    }));
  }

  /** Records an attempt's answer and verdict; an attempt recorded before is kept, and returned. */
  async recordProposal(evolutionId: string, p: Omit<StoredProposal, 'createdAt'>): Promise<StoredProposal> {
    await this.pool.query(
      `INSERT INTO evolution_proposals (evolution_id, round, direction, slot, attempt, proposer, messages, answer, verdict, reason)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
       ON CONFLICT (evolution_id, round, direction, slot, attempt) DO NOTHING`,
      [
        evolutionId,
        p.round,
        p.direction,
        p.slot,
        p.attempt,
        p.proposer,
        JSON.stringify(p.messages.map(storableMessage)),
        p.answer,
        p.verdict,
        p.reason,
      ],
    );
    const stored = await this.proposals(evolutionId, { round: p.round, direction: p.direction, slot: p.slot });
    return stored.find((s) => s.attempt === p.attempt)!;
  }

  async recordCandidate(evolutionId: string, c: StoredCandidate): Promise<void> {
    await this.pool.query(
      `INSERT INTO evolution_candidates (evolution_id, candidate_id, round, direction, slot, parent, spec, version)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (evolution_id, candidate_id) DO NOTHING`,
      [evolutionId, c.candidateId, c.round, c.direction, c.slot, c.parent, JSON.stringify(c.spec), c.version],
    );
  }

  async candidates(evolutionId: string): Promise<StoredCandidate[]> {
    const { rows } = await this.pool.query('SELECT * FROM evolution_candidates WHERE evolution_id = $1 ORDER BY round, direction, slot', [
      evolutionId,
    ]);
    return rows.map(candidateOf);
  }

  async getCandidate(evolutionId: string, candidateId: string): Promise<StoredCandidate | null> {
    const { rows } = await this.pool.query('SELECT * FROM evolution_candidates WHERE evolution_id = $1 AND candidate_id = $2', [
      evolutionId,
      candidateId,
    ]);
    return rows.map(candidateOf)[0] ?? null;
  }

  async recordSelection(evolutionId: string, round: number, direction: string, decision: unknown): Promise<void> {
    await this.pool.query(
      `INSERT INTO evolution_selections (evolution_id, round, direction, decision) VALUES ($1, $2, $3, $4)
       ON CONFLICT (evolution_id, round, direction) DO NOTHING`,
      [evolutionId, round, direction, JSON.stringify(decision)],
    );
  }

  async selections(evolutionId: string): Promise<Array<{ round: number; direction: string; decision: unknown }>> {
    const { rows } = await this.pool.query(
      'SELECT round, direction, decision FROM evolution_selections WHERE evolution_id = $1 ORDER BY round, direction',
      [evolutionId],
    );
    return rows.map((r) => ({ round: r.round, direction: r.direction, decision: r.decision }));
  }

  /** What an evolution has recorded: proposal attempts, candidates, selections, and rollouts per phase. */
  async counts(evolutionId: string): Promise<{
    proposals: number;
    candidates: number;
    selections: number;
    rollouts: Record<string, number>;
    groups: Record<string, number>;
  }> {
    const one = async (table: string) =>
      Number((await this.pool.query(`SELECT count(*) AS n FROM ${table} WHERE evolution_id = $1`, [evolutionId])).rows[0].n);
    const { rows } = await this.pool.query(
      `SELECT phase, count(*) AS n, count(DISTINCT (candidate_id, task_id)) AS groups FROM evolution_rollouts WHERE evolution_id = $1 GROUP BY phase`,
      [evolutionId],
    );
    return {
      proposals: await one('evolution_proposals'),
      candidates: await one('evolution_candidates'),
      selections: await one('evolution_selections'),
      rollouts: Object.fromEntries(rows.map((r) => [r.phase, Number(r.n)])),
      groups: Object.fromEntries(rows.map((r) => [r.phase, Number(r.groups)])),
    };
  }

  /** Stores a frozen pool (kept as first stored) and marks its evolution finished with it. */
  async savePool(p: {
    poolHash: string;
    env: string;
    evolutionId: string | null;
    manifest: unknown;
    specs: Record<string, unknown>;
  }): Promise<void> {
    await this.pool.query(
      `INSERT INTO harness_pools (pool_hash, env, evolution_id, manifest, specs) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (pool_hash) DO NOTHING`,
      [p.poolHash, p.env, p.evolutionId, JSON.stringify(p.manifest), JSON.stringify(p.specs)],
    );
    if (p.evolutionId !== null) {
      await this.pool.query('UPDATE evolutions SET pool_hash = $2, finished_at = COALESCE(finished_at, now()) WHERE evolution_id = $1', [
        p.evolutionId,
        p.poolHash,
      ]);
    }
  }

  async getPool(poolHash: string): Promise<StoredPool | null> {
    const { rows } = await this.pool.query('SELECT * FROM harness_pools WHERE pool_hash = $1', [poolHash]);
    if (rows.length === 0) return null;
    const r = rows[0];
    return {
      poolHash: r.pool_hash,
      env: r.env,
      evolutionId: r.evolution_id,
      manifest: r.manifest,
      specs: r.specs,
      createdAt: r.created_at,
    };
  }

  /** Frozen pools, newest first; `prefix` matches the start of the hash. */
  async listPools(prefix = ''): Promise<StoredPool[]> {
    const { rows } = await this.pool.query("SELECT * FROM harness_pools WHERE pool_hash LIKE $1 || '%' ORDER BY created_at DESC", [prefix]);
    return rows.map((r) => ({
      poolHash: r.pool_hash,
      env: r.env,
      evolutionId: r.evolution_id,
      manifest: r.manifest,
      specs: r.specs,
      createdAt: r.created_at,
    }));
  }
}
