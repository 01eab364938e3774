/**
 * What the router works from and decides: behavior profiles (profiles),
 * routing decisions with their outcomes (routing_decisions), and
 * evaluations (evaluations).
 */
import type { Pool, QueryResultRow } from 'pg';
import type { BehaviorProfiles } from '../router/profiles';
import type { StoredRoutingDecision } from '../router/picks';
import type { RoutingDecision } from '../router/router';
import type { EvaluationSummary } from '../rl/evaluation';
import { parseRow, StoredEvaluationSummary, StoredProfileCells, StoredRoutingColumns } from './rows';

export type { StoredRoutingDecision };

export class RoutingStore {
  constructor(private readonly pool: Pool) {}

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
      [
        runId,
        profiles.version,
        profiles.policyVersion,
        JSON.stringify({
          priorStrength: profiles.priorStrength,
          baseHarnessId: profiles.baseHarnessId,
          cells: profiles.cells,
          kindCells: profiles.kindCells,
        }),
      ],
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
    const { rows } = await this.pool.query('SELECT version, policy_version, created_at FROM profiles WHERE run_id = $1 ORDER BY version', [
      runId,
    ]);
    return rows.map((r) => ({ version: r.version, policyVersion: r.policy_version, createdAt: r.created_at }));
  }

  /** Stores a routing decision once; returns the stored one (an earlier attempt's, if any). */
  async recordRoutingDecision(runId: string, step: number, decision: RoutingDecision): Promise<RoutingDecision> {
    await this.pool.query(
      `INSERT INTO routing_decisions (run_id, step, task_id, task_kind, strategy, profile_version, failure_summary, failure_digest, failure_counts, votes, fallback, chosen, scores)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (run_id, step, task_id) WHERE superseded_by IS NULL DO NOTHING`,
      [
        runId,
        step,
        decision.taskId,
        decision.kind,
        decision.strategy,
        decision.profileVersion,
        decision.failureSummary,
        decision.failureDigest,
        JSON.stringify(decision.failureCounts),
        JSON.stringify(decision.votes),
        decision.fallback,
        decision.chosen,
        JSON.stringify(decision.scores),
      ],
    );
    const stored = await this.routingDecision(runId, step, decision.taskId);
    return stored!;
  }

  async routingDecision(runId: string, step: number, taskId: string): Promise<StoredRoutingDecision | null> {
    const { rows } = await this.pool.query(
      'SELECT * FROM routing_decisions WHERE run_id = $1 AND step = $2 AND task_id = $3 AND superseded_by IS NULL',
      [runId, step, taskId],
    );
    return rows.length ? routingDecisionFromRow(rows[0]) : null;
  }

  async routingDecisions(runId: string): Promise<StoredRoutingDecision[]> {
    const { rows } = await this.pool.query(
      'SELECT * FROM routing_decisions WHERE run_id = $1 AND superseded_by IS NULL ORDER BY step, task_id',
      [runId],
    );
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
    const { rows } = await this.pool.query(
      'SELECT after_steps, summary FROM evaluations WHERE run_id = $1 AND superseded_by IS NULL ORDER BY after_steps',
      [runId],
    );
    return rows.map((r) =>
      parseRow(StoredEvaluationSummary, r.summary, `evaluations row (run ${runId}, after ${r.after_steps} steps): summary`),
    );
  }

  async latestProfileVersion(runId: string): Promise<number | null> {
    const { rows } = await this.pool.query('SELECT max(version) AS v FROM profiles WHERE run_id = $1', [runId]);
    return rows[0].v;
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
