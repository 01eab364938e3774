/**
 * Keeps replicas serving what the run store says they should: each run's
 * newest published version. A replica that restarted has forgotten its
 * runtime-loaded adapters (vLLM keeps them in memory only); one that was out
 * of reach when a version was published never got it. Every couple of
 * seconds the keeper lists each replica's models (GET /models) and loads what
 * is missing or pending (replica-loader.ts), so the replica takes traffic for
 * the version again once it answers the probe.
 *
 * Who keeps which replicas: with `policy.publishVia: replica-workers`, the
 * worker beside each replica keeps its own; with `shared-storage`, every
 * control worker keeps them all (the replicas load from the shared folder).
 * Two keepers never load one version on one replica at once: a load is
 * claimed in the run store first.
 */
import type { Logger } from 'pino';
import type { PublishVia } from '../policy/replicas';
import type { ReplicaStore, ReplicaVersionRecord } from '../store/replica-store';
import type { ReplicaLoadDeps } from './replica-loader';
import { loadVersionOnReplica } from './replica-loader';
import { listReplicaModels } from '../policy/replica-models';

export interface ReplicaKeeperOptions {
  replicas: ReplicaStore;
  logger: Logger;
  via: PublishVia;
  /** Only this replica (a replica worker's own); every replica loaded `via` when absent. */
  replica?: string;
  /** What loading a run's version needs (its trainer, keys, tolerance), from the run's stored config. */
  loadDeps(runId: string, signal: AbortSignal): Promise<ReplicaLoadDeps>;
  /** Names this keeper in the store's claims. */
  holder: string;
  everyMs?: number;
}

/** After a failed load, the keeper waits this long before trying that version on that replica again, doubling up to a minute. */
const RETRY_FIRST_MS = 2000;
const RETRY_MAX_MS = 60_000;

export class ReplicaKeeper {
  private timer: NodeJS.Timeout | null = null;
  /** (replica, version) -> when to try again after failures, and the wait after the next one. */
  private readonly backoff = new Map<string, { at: number; nextMs: number }>();
  private running: Promise<void> | null = null;
  private readonly stop = new AbortController();
  private storeDown = false;

  constructor(private readonly options: ReplicaKeeperOptions) {}

  start(): void {
    const every = this.options.everyMs ?? 2000;
    this.timer = setInterval(() => {
      if (!this.running) this.running = this.tick().finally(() => (this.running = null));
    }, every);
    this.timer.unref();
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.stop.abort();
    await this.running?.catch(() => undefined);
  }

  /** One pass: every replica kept, every version it should serve and does not. */
  async tick(): Promise<void> {
    let wanted: ReplicaVersionRecord[];
    try {
      wanted = await this.options.replicas.wanted({ via: this.options.via, replica: this.options.replica });
    } catch (err) {
      // Once per outage: the store down for minutes would fill the log.
      if (!this.storeDown)
        this.options.logger.warn(
          { err: (err as Error).message },
          'replica keeper: cannot read the run store; trying again, quietly until it answers',
        );
      this.storeDown = true;
      return;
    }
    this.storeDown = false;
    const byReplica = new Map<string, ReplicaVersionRecord[]>();
    for (const row of wanted) byReplica.set(row.replica, [...(byReplica.get(row.replica) ?? []), row]);
    await Promise.all([...byReplica].map(([replica, rows]) => this.keep(replica, rows)));
  }

  private async keep(replica: string, rows: ReplicaVersionRecord[]): Promise<void> {
    let listed = await listReplicaModels(replica);
    if (listed === 'unauthorized') {
      // A replica that wants a key: the run's (its apiKeyEnv, read by this worker).
      const deps = await this.options.loadDeps(rows[0].runId, this.stop.signal).catch(() => null);
      listed = deps ? await listReplicaModels(replica, { apiKey: deps.apiKey }) : null;
    }
    // Out of reach (or still refusing): nothing to load it into; the rollout workers hold it out of rotation meanwhile.
    if (listed === null || listed === 'unauthorized') return;
    for (const row of rows) {
      if (this.stop.signal.aborted) return;
      if (row.state === 'ready' && listed.has(row.policyVersion)) continue;
      const key = `${replica}\n${row.policyVersion}`;
      const wait = this.backoff.get(key);
      if (wait && Date.now() < wait.at) continue;
      if (!(await this.options.replicas.claim(replica, row.policyVersion, this.options.holder))) continue;
      const why =
        row.state === 'ready' ? 'the replica no longer lists it (restarted)' : `it was ${row.state}${row.reason ? ` (${row.reason})` : ''}`;
      try {
        const deps = await this.options.loadDeps(row.runId, this.stop.signal);
        // A replica that answered this version's probe before it lost it gets the same files again without one.
        const result = await loadVersionOnReplica(deps, row, { kind: 'reload', holder: this.options.holder, probed: row.readyAt !== null });
        this.backoff.delete(key);
        this.options.logger.info(
          { replica, runId: row.runId, policyVersion: row.policyVersion, probeMeanAbsDiff: result.probeMeanAbsDiff, why },
          'replica keeper: loaded the policy version again',
        );
      } catch (err) {
        const nextMs = wait ? Math.min(wait.nextMs * 2, RETRY_MAX_MS) : RETRY_FIRST_MS;
        this.backoff.set(key, { at: Date.now() + nextMs, nextMs });
        this.options.logger.warn(
          { replica, runId: row.runId, policyVersion: row.policyVersion, err: (err as Error).message, why, retryInSeconds: nextMs / 1000 },
          'replica keeper: could not load the policy version; trying again',
        );
      }
    }
  }
}
