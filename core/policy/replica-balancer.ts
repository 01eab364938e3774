/**
 * Rollouts over every inference replica of a run, balanced on the client:
 * one balancer per worker process, shared by all its rollout groups.
 *
 * - A request goes to the replica with the fewest requests in flight from
 *   this process, among the replicas that can serve its model. An episode
 *   keeps its turns on the replica it started on while that replica can take
 *   them (vLLM's prefix cache holds the episode's earlier turns).
 * - At most `maxInFlight` requests per replica: past it a request waits in
 *   line, first come first served, for as long as it takes.
 * - A published policy version goes only to replicas the run store says have
 *   loaded it and answered its probe (ReplicaReadiness). The base model needs
 *   no publish: every healthy replica serves it.
 * - A replica that refuses connections, times out or answers a server error
 *   leaves the rotation; a health check (GET /models, every second) brings it
 *   back. A 404 for a published version means the replica lost its adapter
 *   (vLLM forgets runtime-loaded adapters when it restarts): the store is
 *   told, the replica's keeper loads the version again
 *   (core/publish/replica-keeper.ts), and the request goes elsewhere.
 * - When no replica can serve a model for a while (the run's longest retry
 *   interval), waiting requests fail with NoReplicaError, naming each
 *   replica's state: an outage, which the activity's retries wait out and
 *   which pauses the run once they are spent.
 */
import type { Logger } from 'pino';
import { countReplicaRequest, setReplicaState } from '../metrics';
import { listReplicaModels } from './replica-models';
import { type ReplicaReadiness, type ReplicaView, replicaUrl } from './replicas';

/** Why a request failed on a replica, when the replica (not the request) is to blame. */
export type ReplicaFault = 'unreachable' | 'timeout' | 'server_error' | 'lost_adapter';

/** A version asked for within this long is checked on a replica that comes back. */
const RECENT_USE_MS = 60_000;

export class NoReplicaError extends Error {
  override name = 'NoReplicaError';
}

export interface AcquireRequest {
  /** The run's replicas (ReplicaAddresses.expand of its config). */
  servers: readonly string[];
  /** The model the request names: the base model or a published policy version. */
  model: string;
  baseModel: string;
  /** The replica the episode's earlier turns went to. */
  preferred?: string;
  /** The most requests this process sends one replica at once. */
  maxInFlight: number;
  /** How long it waits when no replica can serve its model (the balancer's noReplicaMs when absent). */
  noReplicaMs?: number;
  /** The replicas' API key: the health checks send it too. */
  apiKey?: string;
  signal?: AbortSignal;
}

export interface Lease {
  readonly replica: string;
  /** Aborted when the replica is found dead while this request is in flight: send it elsewhere. */
  readonly signal: AbortSignal;
  /** Gives the slot back; `outcome` is counted per replica. */
  release(outcome: 'ok' | 'error' | ReplicaFault): void;
}

export interface ReplicaBalancerOptions {
  readiness: ReplicaReadiness;
  logger: Logger;
  /** Between health checks of a replica out of rotation. */
  healthCheckMs?: number;
  /** How long what the store said of a version's replicas is used before it is read again. */
  readinessTtlMs?: number;
  /** How long a request waits when no replica can serve its model, before NoReplicaError. */
  noReplicaMs?: number;
  /** A health check's own timeout (of a replica out of rotation; default 3 s). */
  healthTimeoutMs?: number;
  /** The timeout of a check of a replica with requests in flight: a busy replica answers slowly (default 10 s). */
  watchTimeoutMs?: number;
  /** Between checks of the replicas that have requests in flight (a request to a host cut off hangs until its timeout; default 5 s). */
  watchMs?: number;
}

interface Replica {
  url: string;
  inFlight: number;
  requests: number;
  healthy: boolean;
  reason: string | null;
  checking: boolean;
  /** The key the run's requests last sent it with, for its health checks. */
  apiKey?: string;
  /** One per request in flight: aborted when the replica stops answering, so the request goes elsewhere. */
  leases: Set<AbortController>;
}

interface Readiness {
  known: boolean;
  /** Replica -> when it was last made ready (the store's clock). */
  ready: Map<string, number>;
  at: number;
  /** When a request last asked for the version. */
  usedAt: number;
}

interface Waiter {
  request: AcquireRequest;
  resolve(lease: Lease): void;
  reject(err: Error): void;
  /** Since when no replica could serve it at all (capacity aside); null while one can. */
  stuckSince: number | null;
}

export class ReplicaBalancer {
  private readonly replicas = new Map<string, Replica>();
  private readonly readiness = new Map<string, Readiness>();
  private readonly refreshing = new Map<string, Promise<void>>();
  /**
   * Version -> replica -> when this process found it lost (the store's clock; Infinity until the store has
   * it): the replica is not sent the version again until the store says it was made ready after that, even
   * if a read of the store from before the loss says ready.
   */
  private readonly lost = new Map<string, Map<string, number>>();
  private waiters: Waiter[] = [];
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly healthCheckMs: number;
  private readonly readinessTtlMs: number;
  private readonly noReplicaMs: number;
  private readonly healthTimeoutMs: number;
  private readonly watchMs: number;
  private readonly watchTimeoutMs: number;
  private watcher: NodeJS.Timeout | null = null;
  private watching = false;

  constructor(private readonly options: ReplicaBalancerOptions) {
    this.healthCheckMs = options.healthCheckMs ?? 1000;
    this.readinessTtlMs = options.readinessTtlMs ?? 2000;
    this.noReplicaMs = options.noReplicaMs ?? 60_000;
    this.healthTimeoutMs = options.healthTimeoutMs ?? 3000;
    this.watchMs = options.watchMs ?? 5000;
    this.watchTimeoutMs = options.watchTimeoutMs ?? 10_000;
  }

  /** A slot on the replica that should take this request: at once, or once one is free (or NoReplicaError). */
  async acquire(request: AcquireRequest): Promise<Lease> {
    request.signal?.throwIfAborted();
    const servers = request.servers.map(replicaUrl);
    const normalized = { ...request, servers, preferred: request.preferred === undefined ? undefined : replicaUrl(request.preferred) };
    if (request.apiKey) for (const server of servers) this.state(server).apiKey = request.apiKey;
    await this.fresh(normalized.model, normalized.baseModel);
    const readiness = this.readiness.get(normalized.model);
    if (readiness) readiness.usedAt = Date.now();
    const picked = this.pick(normalized);
    if (picked.replica && this.waiters.length === 0) return this.lease(picked.replica);
    return new Promise<Lease>((resolve, reject) => {
      const signal = request.signal;
      const onAbort = () => {
        if (!this.waiters.includes(waiter)) return;
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(signal!.reason instanceof Error ? signal!.reason : new Error('aborted'));
      };
      // The listener goes with the wait: an activity's signal would otherwise collect one per wait.
      const done = () => signal?.removeEventListener('abort', onAbort);
      const waiter: Waiter = {
        request: normalized,
        resolve: (lease) => (done(), resolve(lease)),
        reject: (err) => (done(), reject(err)),
        stuckSince: picked.stuck ? Date.now() : null,
      };
      this.waiters.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pump();
      this.tick();
    });
  }

  /**
   * A request failed on `replica` through the replica's fault: a lost adapter
   * takes the replica out for that version only (and tells the store); any
   * other fault takes it out of rotation until its health check passes.
   */
  fault(replica: string, model: string, fault: ReplicaFault, detail: string): void {
    const url = replicaUrl(replica);
    if (fault === 'lost_adapter') {
      const lostHere = this.lost.get(model) ?? new Map<string, number>();
      this.lost.set(model, lostHere);
      if (lostHere.get(url) === Infinity) return;
      lostHere.set(url, Infinity);
      this.options.logger.warn(
        { replica: url, policyVersion: model, detail },
        'inference replica lost the policy version (restarted?); its keeper loads it again, requests go to other replicas',
      );
      this.options.readiness.markLost(url, model, detail).then(
        (at) => lostHere.set(url, at),
        (err: unknown) => {
          lostHere.set(url, Date.now());
          this.options.logger.warn(
            { replica: url, policyVersion: model, err: (err as Error).message },
            'could not record the lost version in the run store',
          );
        },
      );
      this.pump();
      return;
    }
    const state = this.state(url);
    if (!state.healthy) return;
    state.healthy = false;
    state.reason = `${fault.replace('_', ' ')}: ${detail}`.slice(0, 300);
    this.publishState(state);
    // Unreachable: its other requests in flight would wait out their timeout on a host that is gone; they go elsewhere now.
    if (fault === 'unreachable')
      for (const lease of state.leases) lease.abort(new NoReplicaError(`${url} is out of rotation: ${state.reason}`));
    this.options.logger.warn(
      { replica: url, fault, detail },
      'inference replica out of rotation; its requests go to other replicas until its health check passes',
    );
    void this.checkHealth(state);
  }

  /** How this process sees each of `servers`. */
  views(servers: readonly string[]): ReplicaView[] {
    return servers.map((server) => {
      const r = this.state(replicaUrl(server));
      return { replica: r.url, healthy: r.healthy, reason: r.reason, inFlight: r.inFlight, requests: r.requests };
    });
  }

  /** Stops the health checks and fails the requests still waiting. */
  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.watcher) clearInterval(this.watcher);
    this.timer = null;
    this.watcher = null;
    for (const w of this.waiters) w.reject(new NoReplicaError('the worker is shutting down'));
    this.waiters = [];
  }

  private state(url: string): Replica {
    let state = this.replicas.get(url);
    if (!state) {
      state = { url, inFlight: 0, requests: 0, healthy: true, reason: null, checking: false, leases: new Set() };
      this.replicas.set(url, state);
    }
    return state;
  }

  /** Whether `url` may take requests for `model` as far as publishing goes. */
  private serves(url: string, model: string, baseModel: string): boolean {
    if (model === baseModel) return true;
    const readiness = this.readiness.get(model);
    if (!readiness) return false;
    if (!readiness.known) return true;
    const readyAt = readiness.ready.get(url);
    const lostAt = this.lost.get(model)?.get(url);
    return readyAt !== undefined && (lostAt === undefined || readyAt > lostAt);
  }

  private pick(request: AcquireRequest): { replica?: Replica; stuck: boolean } {
    const candidates = request.servers
      .map((s) => this.state(s))
      .filter((r) => r.healthy && this.serves(r.url, request.model, request.baseModel));
    if (candidates.length === 0) return { stuck: true };
    const open = candidates.filter((r) => r.inFlight < request.maxInFlight);
    if (open.length === 0) return { stuck: false };
    const preferred = open.find((r) => r.url === request.preferred);
    if (preferred) return { replica: preferred, stuck: false };
    return {
      replica: open.reduce((a, b) => (b.inFlight < a.inFlight || (b.inFlight === a.inFlight && b.requests < a.requests) ? b : a)),
      stuck: false,
    };
  }

  private lease(replica: Replica): Lease {
    replica.inFlight += 1;
    replica.requests += 1;
    const abort = new AbortController();
    replica.leases.add(abort);
    this.publishState(replica);
    this.watch();
    let released = false;
    return {
      replica: replica.url,
      signal: abort.signal,
      release: (outcome) => {
        if (released) return;
        released = true;
        replica.leases.delete(abort);
        replica.inFlight -= 1;
        countReplicaRequest(replica.url, outcome);
        this.publishState(replica);
        this.pump();
      },
    };
  }

  /** Hands free slots to waiting requests in order; fails those no replica could serve for too long. */
  private pump(): void {
    const now = Date.now();
    const still: Waiter[] = [];
    for (const waiter of this.waiters) {
      const picked = this.pick(waiter.request);
      if (picked.replica) {
        waiter.resolve(this.lease(picked.replica));
        continue;
      }
      if (!picked.stuck) waiter.stuckSince = null;
      else waiter.stuckSince ??= now;
      const patience = waiter.request.noReplicaMs ?? this.noReplicaMs;
      if (waiter.stuckSince !== null && now - waiter.stuckSince >= patience) {
        waiter.reject(new NoReplicaError(this.describeStuck(waiter.request, patience)));
        continue;
      }
      still.push(waiter);
    }
    this.waiters = still;
    if (this.waiters.length === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  /** While requests wait: read the store again for the versions they need, then hand out slots. */
  private tick(): void {
    if (this.timer || this.closed) return;
    this.timer = setInterval(
      () => {
        const models = new Map(this.waiters.map((w) => [w.request.model, w.request.baseModel]));
        void Promise.all([...models].map(([model, base]) => this.fresh(model, base, true).catch(() => undefined))).then(() => this.pump());
      },
      Math.min(1000, this.readinessTtlMs),
    );
    this.timer.unref();
  }

  /** What the store says of the version's replicas, read again when older than the TTL (or now, `force`). */
  private async fresh(model: string, baseModel: string, force = false): Promise<void> {
    if (model === baseModel) return;
    const known = this.readiness.get(model);
    if (known && !force && Date.now() - known.at < this.readinessTtlMs) return;
    let refreshing = this.refreshing.get(model);
    if (!refreshing) {
      refreshing = this.options.readiness
        .readyReplicas(model)
        .then(({ known: isKnown, ready }) => {
          const readyAt = new Map([...ready].map(([url, at]): [string, number] => [replicaUrl(url), at]));
          this.readiness.set(model, {
            known: isKnown,
            ready: readyAt,
            at: Date.now(),
            usedAt: this.readiness.get(model)?.usedAt ?? Date.now(),
          });
        })
        .finally(() => this.refreshing.delete(model));
      this.refreshing.set(model, refreshing);
    }
    try {
      await refreshing;
    } catch (err) {
      // The store is out of reach: go on with what it said last; with nothing known yet, the request fails.
      if (!this.readiness.has(model)) throw err;
    }
  }

  /**
   * While requests are in flight, the replicas they wait on are checked every
   * `watchMs`: one that does not answer its health check leaves the rotation,
   * and its requests in flight go to other replicas (a request to a host that
   * dropped off the network would otherwise hang until its own timeout).
   */
  private watch(): void {
    if (this.watcher || this.closed) return;
    this.watcher = setInterval(() => {
      const busy = [...this.replicas.values()].filter((r) => r.healthy && r.inFlight > 0);
      if (busy.length === 0) {
        clearInterval(this.watcher!);
        this.watcher = null;
        return;
      }
      if (this.watching) return;
      this.watching = true;
      void Promise.all(
        busy.map(async (r) => {
          // Any answer, even a refusal of the key, shows the host is there.
          if (
            (await listReplicaModels(r.url, { timeoutMs: this.watchTimeoutMs, apiKey: r.apiKey })) === null &&
            r.healthy &&
            r.inFlight > 0
          ) {
            this.fault(
              r.url,
              '',
              'unreachable',
              `no answer to its health check within ${this.watchTimeoutMs / 1000} s while requests were in flight`,
            );
          }
        }),
      ).finally(() => (this.watching = false));
    }, this.watchMs);
    this.watcher.unref();
  }

  /** Polls an out-of-rotation replica until it answers; versions it no longer lists are reported lost. */
  private async checkHealth(state: Replica): Promise<void> {
    if (state.checking) return;
    state.checking = true;
    try {
      while (!state.healthy && !this.closed) {
        await new Promise((resolve) => setTimeout(resolve, this.healthCheckMs).unref());
        const listed = await listReplicaModels(state.url, { timeoutMs: this.healthTimeoutMs, apiKey: state.apiKey });
        if (listed === null) continue;
        state.healthy = true;
        state.reason = null;
        this.publishState(state);
        this.options.logger.info({ replica: state.url }, 'inference replica answers again; back in rotation');
        // The versions asked for lately that it no longer lists: lost (a restart); its keeper loads them again.
        for (const [model, readiness] of this.readiness) {
          const recent = Date.now() - readiness.usedAt < RECENT_USE_MS;
          if (listed !== 'unauthorized' && recent && readiness.known && this.serves(state.url, model, '') && !listed.has(model))
            this.fault(state.url, model, 'lost_adapter', 'not listed by /models after the replica came back');
        }
        this.pump();
      }
    } finally {
      state.checking = false;
    }
  }

  private publishState(replica: Replica): void {
    setReplicaState(replica.url, replica.inFlight, replica.healthy);
  }

  private describeStuck(request: AcquireRequest, patience: number): string {
    const lines = request.servers.map((s) => {
      const r = this.state(s);
      if (!r.healthy) return `${r.url}: out of rotation (${r.reason})`;
      return `${r.url}: has not loaded ${request.model} (its keeper loads it when it can)`;
    });
    // One line: it becomes a run's pause reason.
    return `no inference replica could take requests for ${request.model} for ${Math.round(patience / 1000)} s: ${lines.join('; ')}`;
  }
}
