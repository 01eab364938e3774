/**
 * What the run's status shows of each inference replica: whether the rollout
 * workers send it requests, the run's version it serves, its requests in
 * flight. Put together from what the steps report: the rollout workers' views
 * (each worker's latest, from its rollout groups) and each publish's outcome.
 *
 * Workflow code: deterministic, no I/O.
 */
import type { WorkerReplicaViews } from '../core/policy/replicas';
import type { ReplicaPublishOutcome } from './publish';

export interface ReplicaStatus {
  replica: string;
  /** Every rollout worker that reported last sends it requests. */
  healthy: boolean;
  /** Why a worker holds it out of rotation (or why the last publish could not load it); null when none does. */
  reason: string | null;
  /** The run's newest version loaded there; null before any publish, or when the last one could not load it. */
  policyVersion: string | null;
  /** The last publish probe's mean |Δ| there. */
  probeMeanAbsDiff: number | null;
  /** Requests in flight from the rollout workers, as each reported last. */
  inFlight: number;
}

/** The replicas' status after the rollout workers' latest views (one entry per worker, its newest). */
export function withWorkerViews(current: readonly ReplicaStatus[], views: readonly WorkerReplicaViews[]): ReplicaStatus[] {
  const byReplica = new Map(current.map((r) => [r.replica, { ...r, inFlight: 0 }]));
  const seen = new Map<string, { healthy: boolean; reason: string | null }>();
  for (const worker of views) {
    for (const view of worker.views) {
      const entry = byReplica.get(view.replica) ?? {
        replica: view.replica,
        healthy: true,
        reason: null,
        policyVersion: null,
        probeMeanAbsDiff: null,
        inFlight: 0,
      };
      entry.inFlight += view.inFlight;
      byReplica.set(view.replica, entry);
      const before = seen.get(view.replica);
      seen.set(view.replica, {
        healthy: (before?.healthy ?? true) && view.healthy,
        reason: before?.reason ?? (view.healthy ? null : `${worker.worker}: ${view.reason}`),
      });
    }
  }
  for (const [replica, health] of seen) Object.assign(byReplica.get(replica)!, health);
  return [...byReplica.values()];
}

/** The replicas' status after a publish: the version each loaded, or why not. */
export function withPublish(current: readonly ReplicaStatus[], outcomes: readonly ReplicaPublishOutcome[]): ReplicaStatus[] {
  const byReplica = new Map(current.map((r) => [r.replica, { ...r }]));
  for (const o of outcomes) {
    const entry = byReplica.get(o.replica) ?? {
      replica: o.replica,
      healthy: true,
      reason: null,
      policyVersion: null,
      probeMeanAbsDiff: null,
      inFlight: 0,
    };
    if (o.loaded)
      Object.assign(entry, {
        policyVersion: o.policyVersion,
        probeMeanAbsDiff: o.probeMeanAbsDiff,
        reason: entry.healthy ? null : entry.reason,
      });
    else Object.assign(entry, { policyVersion: null, probeMeanAbsDiff: null, reason: `publish of ${o.policyVersion}: ${o.reason}` });
    byReplica.set(o.replica, entry);
  }
  return [...byReplica.values()];
}

/** One line per replica, for the run's current details in the Web UI. */
export function replicaLines(replicas: readonly ReplicaStatus[]): string[] {
  return replicas.map((r) => {
    const state = r.healthy ? 'healthy' : 'OUT OF ROTATION';
    const version = r.policyVersion ? `serves ${r.policyVersion}` : 'no version of this run loaded';
    const why = r.reason ? ` (${r.reason})` : '';
    return `replica ${r.replica}: ${state}, ${version}, ${r.inFlight} in flight${why}`;
  });
}
