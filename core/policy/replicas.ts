/**
 * Inference replicas: the inference servers of a run (vLLM, the sim cluster),
 * each named by the URL rollout workers reach it at (ending in /v1), and what
 * the run store records of the policy versions each one serves.
 */

/**
 * How a replica gets a published version's adapter:
 * - `shared-storage`: a control worker unpacks it into its adapter folder and
 *   asks the replica to load it from there (the replica must see that folder
 *   at the same path: one machine, or a shared volume);
 * - `replica-workers`: a worker beside each replica, serving its own task
 *   queue (replicaTaskQueue), fetches the adapter from the trainer into its
 *   own folder and loads it into its replica. Nothing is shared.
 */
export const PUBLISH_VIAS = ['shared-storage', 'replica-workers'] as const;
export type PublishVia = (typeof PUBLISH_VIAS)[number];

/** A replica's URL in one spelling: no trailing slash. */
export function replicaUrl(url: string): string {
  return url.replace(/\/+$/, '');
}

/** The state of a version on a replica (core/store/replica-store.ts). */
export type ReplicaVersionState = 'pending' | 'loading' | 'ready';

/** A policy version to load on a replica, and how to load it again after the replica forgets it. */
export interface ReplicaVersionTarget {
  replica: string;
  runId: string;
  policyVersion: string;
  /** The trained step whose sampler weights these are. */
  step: number;
  samplerPath: string;
  /** The trainer step whose probe checks the load (the step itself, or the step a restored model loaded). */
  probeOf: { runId: string; step: number };
  via: PublishVia;
}

/** What rollout workers read and tell of the versions replicas serve (the run store implements it). */
export interface ReplicaReadiness {
  /**
   * The replicas where `policyVersion` was loaded and probed, each with when
   * (ms, the store's clock). `known` is false
   * when the store has no record of the version at all (published by a worker
   * from before replicas were tracked): every replica is taken to serve it.
   */
  readyReplicas(policyVersion: string): Promise<{ known: boolean; ready: ReadonlyMap<string, number> }>;
  /**
   * The replica no longer serves the version (it answered 404: restarted): its keeper loads it again.
   * Resolves with when the store recorded it (ms, the store's clock), which a later ready time outdates.
   */
  markLost(replica: string, policyVersion: string, reason: string): Promise<number>;
}

/** How one rollout worker sees the run's replicas, as its rollout groups report it now and then. */
export interface WorkerReplicaViews {
  /** The worker process (its Temporal identity). */
  worker: string;
  views: ReplicaView[];
}

/** How one worker process sees a replica: what `run status` and the Web UI show of it. */
export interface ReplicaView {
  replica: string;
  healthy: boolean;
  /** Why it is out of rotation; null while healthy. */
  reason: string | null;
  /** This process's requests in flight to it. */
  inFlight: number;
  /** Requests this process sent it, since the process started. */
  requests: number;
}

/**
 * The task queue of the worker beside a replica (`publishVia: replica-workers`):
 * `harness-s-replica@<host:port>` of its URL. Pure string work: workflows use it.
 */
export function replicaTaskQueue(replica: string): string {
  const host = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]+)/i.exec(replica)?.[1];
  if (!host) throw new Error(`${replica} is not an http(s) URL`);
  return `harness-s-replica@${host.toLowerCase()}`;
}
