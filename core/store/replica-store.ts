/**
 * Which policy versions each inference replica serves (replica_versions,
 * migration ..._inference-replicas.sql): written when a version is published
 * and whenever a replica loads it again, read by every rollout worker's
 * balancer (core/policy/replica-balancer.ts) and by the replica keepers
 * (core/publish/replica-keeper.ts).
 */
import type { Pool, QueryResultRow } from 'pg';
import type { PublishVia, ReplicaReadiness, ReplicaVersionState, ReplicaVersionTarget } from '../policy/replicas';

export interface ReplicaVersionRecord extends ReplicaVersionTarget {
  state: ReplicaVersionState;
  reason: string | null;
  probeMeanAbsDiff: number | null;
  readyAt: Date | null;
  updatedAt: Date;
}

/** A keeper's claim on a version it is loading: taken over by another keeper once older than this. */
const CLAIM_SECONDS = 60;
/** Versions of runs whose rows have not changed for this long are no longer kept on restarted replicas. */
const KEEP_DAYS = 7;

export class ReplicaStore implements ReplicaReadiness {
  constructor(private readonly pool: Pool) {}

  /**
   * A version about to be published on each of `targets`: 'pending' until
   * loaded. A replica that already has a row for it keeps it (a retried publish
   * does not undo a 'ready').
   */
  async plan(targets: readonly ReplicaVersionTarget[]): Promise<void> {
    if (targets.length === 0) return;
    // Claimed by the publish from the start, so a keeper leaves it to the publish (unless its claim goes stale:
    // a replica worker that never takes the load).
    await this.pool.query(
      `INSERT INTO replica_versions (replica, policy_version, run_id, step, sampler_path, probe_run_id, probe_step, via, state, claimed_by, claimed_at)
       SELECT t.replica, t.policy_version, t.run_id, t.step, t.sampler_path, t.probe_run_id, t.probe_step, t.via, 'loading', 'publish', now()
         FROM jsonb_to_recordset($1::jsonb) AS t(replica text, policy_version text, run_id text, step int, sampler_path text,
                                                  probe_run_id text, probe_step int, via text)
       ON CONFLICT (replica, policy_version) DO NOTHING`,
      [
        JSON.stringify(
          targets.map((t) => ({
            replica: t.replica,
            policy_version: t.policyVersion,
            run_id: t.runId,
            step: t.step,
            sampler_path: t.samplerPath,
            probe_run_id: t.probeOf.runId,
            probe_step: t.probeOf.step,
            via: t.via,
          })),
        ),
      ],
    );
  }

  /**
   * Claims a version's load on a replica for `holder` (or renews its claim): false while another holder's
   * fresh claim stands, unless `force` (a publish, which owns the load of the version it publishes).
   */
  async claim(replica: string, policyVersion: string, holder: string, force = false): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE replica_versions SET state = 'loading', claimed_by = $3, claimed_at = now(), updated_at = now()
        WHERE replica = $1 AND policy_version = $2
          AND ($5::boolean OR state <> 'loading' OR claimed_by = $3 OR claimed_at < now() - make_interval(secs => $4))`,
      [replica, policyVersion, holder, CLAIM_SECONDS, force],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Loaded (and probed, with `probeMeanAbsDiff`; null keeps the last probe's): rollouts of the version may go to the replica. */
  async markReady(replica: string, policyVersion: string, probeMeanAbsDiff: number | null): Promise<void> {
    await this.pool.query(
      `UPDATE replica_versions SET state = 'ready', reason = NULL, probe_mean_abs_diff = COALESCE($3, probe_mean_abs_diff), claimed_by = NULL, claimed_at = NULL,
              ready_at = now(), updated_at = now()
        WHERE replica = $1 AND policy_version = $2`,
      [replica, policyVersion, probeMeanAbsDiff],
    );
  }

  /** Not loaded (the replica was out of reach, refused it, or forgot it): its keeper tries again. */
  async markPending(replica: string, policyVersion: string, reason: string): Promise<void> {
    await this.pool.query(
      `UPDATE replica_versions SET state = 'pending', reason = $3, claimed_by = NULL, claimed_at = NULL, updated_at = now()
        WHERE replica = $1 AND policy_version = $2`,
      [replica, policyVersion, reason.slice(0, 1000)],
    );
  }

  async markLost(replica: string, policyVersion: string, reason: string): Promise<number> {
    const { rows } = await this.pool.query(
      `UPDATE replica_versions SET state = 'pending', reason = $3, claimed_by = NULL, claimed_at = NULL, updated_at = now()
        WHERE replica = $1 AND policy_version = $2 RETURNING updated_at`,
      [replica, policyVersion, reason.slice(0, 1000)],
    );
    return rows[0] ? (rows[0].updated_at as Date).getTime() : Date.now();
  }

  async readyReplicas(policyVersion: string): Promise<{ known: boolean; ready: ReadonlyMap<string, number> }> {
    const { rows } = await this.pool.query('SELECT replica, state, ready_at FROM replica_versions WHERE policy_version = $1', [
      policyVersion,
    ]);
    const ready = rows.filter((r) => r.state === 'ready').map((r): [string, number] => [r.replica, (r.ready_at as Date).getTime()]);
    return { known: rows.length > 0, ready: new Map(ready) };
  }

  /**
   * What each replica should serve now: per (replica, run), the version
   * published last, for runs not finished whose versions changed in the last
   * KEEP_DAYS days, of replicas loaded `via` (and only `replica` when given).
   */
  async wanted(filter: { via: PublishVia; replica?: string }): Promise<ReplicaVersionRecord[]> {
    const { rows } = await this.pool.query(
      `SELECT DISTINCT ON (v.replica, v.run_id) v.*
         FROM replica_versions v JOIN runs r ON r.run_id = v.run_id AND r.finished_at IS NULL
        WHERE v.via = $1 AND ($2::text IS NULL OR v.replica = $2)
          AND v.run_id IN (SELECT run_id FROM replica_versions GROUP BY run_id HAVING max(updated_at) > now() - make_interval(days => $3))
        ORDER BY v.replica, v.run_id, v.created_at DESC`,
      [filter.via, filter.replica ?? null, KEEP_DAYS],
    );
    return rows.map(versionRecord);
  }

  /** Every replica's newest version of a run (what `run status` shows). */
  async ofRun(runId: string): Promise<ReplicaVersionRecord[]> {
    const { rows } = await this.pool.query(
      `SELECT DISTINCT ON (replica) * FROM replica_versions WHERE run_id = $1 ORDER BY replica, created_at DESC`,
      [runId],
    );
    return rows.map(versionRecord);
  }

  /** How to load a version (from any replica's row), or null when none was planned. */
  async target(policyVersion: string): Promise<ReplicaVersionTarget | null> {
    const { rows } = await this.pool.query('SELECT * FROM replica_versions WHERE policy_version = $1 ORDER BY created_at LIMIT 1', [
      policyVersion,
    ]);
    return rows[0] ? versionRecord(rows[0]) : null;
  }

  /** A version's row on a replica. */
  async get(replica: string, policyVersion: string): Promise<ReplicaVersionRecord | null> {
    const { rows } = await this.pool.query('SELECT * FROM replica_versions WHERE replica = $1 AND policy_version = $2', [
      replica,
      policyVersion,
    ]);
    return rows[0] ? versionRecord(rows[0]) : null;
  }
}

function versionRecord(r: QueryResultRow): ReplicaVersionRecord {
  return {
    replica: r.replica,
    runId: r.run_id,
    policyVersion: r.policy_version,
    step: r.step,
    samplerPath: r.sampler_path,
    probeOf: { runId: r.probe_run_id, step: r.probe_step },
    via: r.via,
    state: r.state,
    reason: r.reason,
    probeMeanAbsDiff: r.probe_mean_abs_diff,
    readyAt: r.ready_at,
    updatedAt: r.updated_at,
  };
}
