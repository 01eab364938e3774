/**
 * Tinker sessions of one worker process. A Tinker server unloads the models
 * of a session that stops sending heartbeats (SkyRL: after 300 s), so the
 * process keeps a session per trainer and heartbeats it on a clock for as
 * long as it lives, like the SDK does; it also heartbeats the sessions that
 * own the models it trains (a model created by an earlier process belongs to
 * that process's session). A session the server no longer knows (404) is
 * dropped and a new one is opened on next use. SkyRL 0.4 keeps an expired
 * session's record and answers its heartbeats with 200, so there an expiry
 * shows only when an op finds the model gone ("Model ... not loaded"), which
 * the run restores from (client.ts, trainer-restore.ts).
 *
 * No session is tied to the process that opened it: every trainer worker
 * runs `keepLiveRunSessions`, which reads the sessions of the live runs from
 * the run store on the same clock and keeps each alive, so losing the host
 * that created a run's model does not expire it. A run is live while it is
 * not finished (summarizeRun marks it) and did something in the last
 * LIVE_RUN_QUIET_DAYS; a run that failed or was cancelled is kept that long
 * after its last activity, then let go (its model is unloaded by the trainer;
 * `run recover` restores it from a checkpoint). A process's own session is
 * kept as long as the process lives, whatever runs its models belong to.
 */
import type { Logger } from 'pino';
import { apiKeyOf } from '../../secrets';
import type { LiveTrainerSession } from '../../store/run-store';
import { TinkerClient } from './client';

/** How often sessions are kept alive (the SDK's period), and how often trainer workers read the live runs' sessions. */
export const SESSION_HEARTBEAT_SECONDS = 10;

/**
 * How often this process heartbeats trainer sessions: $HARNESS_S_TRAINER_HEARTBEAT_SECONDS
 * (a number > 0), else SESSION_HEARTBEAT_SECONDS. Well under the trainer's
 * session timeout (SkyRL: 300 s); read once at process start.
 */
export function trainerHeartbeatSecondsFromEnv(): number {
  const raw = process.env.HARNESS_S_TRAINER_HEARTBEAT_SECONDS?.trim();
  if (!raw) return SESSION_HEARTBEAT_SECONDS;
  const seconds = Number(raw);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new Error(
      `HARNESS_S_TRAINER_HEARTBEAT_SECONDS='${raw}' is not a number of seconds above 0 (unset: ${SESSION_HEARTBEAT_SECONDS})`,
    );
  }
  return seconds;
}

/** A run not finished whose last activity (registered, changed, a model trained, a step completed) is older than this is no longer kept alive. */
export const LIVE_RUN_QUIET_DAYS = 7;

export class TinkerSessionKeeper {
  private current: Promise<string> | null = null;
  private currentId: string | null = null;
  private modelSeqId = 0;
  /** Sessions kept besides this process's own. */
  private readonly kept = new Set<string>();
  /** Sessions whose last heartbeat failed (logged once until one goes through). */
  private readonly failing = new Set<string>();
  /** Sessions the trainer said it no longer knows: never heartbeated again. */
  private readonly gone = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private readonly client: TinkerClient;

  constructor(
    baseUrl: string,
    apiKey: string,
    private readonly logger: Logger,
    private readonly tags: string[] = ['harness-s'],
    heartbeatSeconds = SESSION_HEARTBEAT_SECONDS,
  ) {
    this.client = new TinkerClient({ baseUrl, apiKey, pollSeconds: 1, requestTimeoutSeconds: 10 });
    this.timer = setInterval(() => void this.beat(), heartbeatSeconds * 1000);
    this.timer.unref();
  }

  /** This process's session on the trainer, opened on first use (and again after it expired). */
  sessionId(): Promise<string> {
    if (!this.current) {
      const opening = this.client.createSession(this.tags, { harness_s_pid: String(process.pid) });
      this.current = opening;
      opening.then(
        (id) => {
          if (this.current === opening) this.currentId = id;
          this.logger.info({ trainer: this.client.baseUrl, sessionId: id }, 'trainer session opened');
        },
        () => {
          if (this.current === opening) this.current = null;
        },
      );
    }
    return this.current;
  }

  /** The model_seq_id of the next create_model in this process's session. */
  nextModelSeqId(): number {
    return this.modelSeqId++;
  }

  /** Drops a session the server said it does not know; the next use opens a new one. */
  forget(sessionId: string): void {
    this.kept.delete(sessionId);
    this.failing.delete(sessionId);
    this.gone.add(sessionId);
    if (this.currentId === sessionId) {
      this.current = null;
      this.currentId = null;
    }
  }

  /** Keeps a session alive too: the one that owns a model this process trains (until a keepOnly that does not list it). */
  keepAlive(sessionId: string): void {
    if (!this.gone.has(sessionId)) this.kept.add(sessionId);
  }

  /** Keeps exactly these sessions besides this process's own (the live runs' sessions); the others are let go. */
  keepOnly(sessionIds: Iterable<string>): void {
    const listed = new Set(sessionIds);
    this.kept.clear();
    for (const id of this.gone) if (!listed.has(id)) this.gone.delete(id);
    for (const id of listed) this.keepAlive(id);
  }

  /** The sessions this keeper heartbeats besides its process's own. */
  keptSessions(): string[] {
    return [...this.kept];
  }

  /** Sends one round of heartbeats now (also what the clock does). */
  async beat(): Promise<void> {
    const current = this.current ? await this.current.catch(() => null) : null;
    const ids = new Set([...(current ? [current] : []), ...this.kept]);
    await Promise.all(
      [...ids].map(async (id) => {
        try {
          if ((await this.client.heartbeatSession(id)) === 'alive') {
            if (this.failing.delete(id))
              this.logger.info({ trainer: this.client.baseUrl, sessionId: id }, 'trainer session heartbeat goes through again');
            return;
          }
          this.logger.warn(
            { trainer: this.client.baseUrl, sessionId: id },
            'the trainer no longer knows this session (its models are unloaded)',
          );
          this.forget(id);
        } catch (err) {
          // Once per outage, not at every beat: a trainer that is down for hours would fill the log.
          if (this.failing.has(id)) return;
          this.failing.add(id);
          this.logger.warn(
            { trainer: this.client.baseUrl, sessionId: id, err: (err as Error).message },
            'trainer session heartbeat failed; trying again on the clock, quietly until it goes through',
          );
        }
      }),
    );
  }

  close(): void {
    clearInterval(this.timer);
  }
}

/** One keeper per trainer endpoint (URL and key), for the worker process. */
export class TrainerSessions {
  private readonly keepers = new Map<string, TinkerSessionKeeper>();

  constructor(
    private readonly logger: Logger,
    private readonly heartbeatSeconds = SESSION_HEARTBEAT_SECONDS,
  ) {}

  for(baseUrl: string, apiKey: string): TinkerSessionKeeper {
    const key = `${baseUrl}\n${apiKey}`;
    let keeper = this.keepers.get(key);
    if (!keeper) {
      keeper = new TinkerSessionKeeper(baseUrl, apiKey, this.logger, undefined, this.heartbeatSeconds);
      this.keepers.set(key, keeper);
    }
    return keeper;
  }

  /** Keeps exactly these sessions (each at its trainer) besides each keeper's own; a keeper of no listed session lets all of its others go. */
  keepOnly(sessions: ReadonlyArray<{ baseUrl: string; apiKey: string; sessionId: string }>): void {
    const byKeeper = new Map<TinkerSessionKeeper, string[]>([...this.keepers.values()].map((keeper) => [keeper, []]));
    for (const s of sessions) {
      const keeper = this.for(s.baseUrl, s.apiKey);
      byKeeper.set(keeper, [...(byKeeper.get(keeper) ?? []), s.sessionId]);
    }
    for (const [keeper, ids] of byKeeper) keeper.keepOnly(ids);
  }

  close(): void {
    for (const keeper of this.keepers.values()) keeper.close();
    this.keepers.clear();
  }
}

export interface LiveRunSessionsOptions {
  sessions: TrainerSessions;
  /** The run store's live runs' sessions (RunStore.liveTrainerSessions). */
  store: { liveTrainerSessions(activeWithinSeconds: number): Promise<LiveTrainerSession[]> };
  logger: Logger;
  /** How often the store is read (SESSION_HEARTBEAT_SECONDS). */
  everySeconds?: number;
  /** A run's trainer key in this process (default: $apiKeyEnv, as the trainer activities read it). */
  apiKey?: (apiKeyEnv: string | null) => string;
}

export interface LiveRunSessions {
  /** Reads the live runs' sessions now and keeps them (also what the clock does). */
  refresh(): Promise<void>;
  close(): void;
}

/**
 * A trainer worker's loop: every `everySeconds`, the sessions of the live
 * runs in the run store become the sessions its keepers heartbeat, so any
 * trainer worker keeps every live run's model loaded. A run whose trainer key
 * this process lacks is skipped, with one warning per run. When the store
 * cannot be read, the sessions of the last read stay kept.
 */
export function keepLiveRunSessions(options: LiveRunSessionsOptions): LiveRunSessions {
  const { sessions, store, logger } = options;
  const apiKey = options.apiKey ?? ((apiKeyEnv: string | null) => apiKeyOf(apiKeyEnv === null ? {} : { apiKeyEnv }, 'trainer'));
  const warned = new Set<string>();
  let reading: Promise<void> | null = null;
  let closed = false;

  async function read(): Promise<void> {
    let live: LiveTrainerSession[];
    try {
      live = await store.liveTrainerSessions(LIVE_RUN_QUIET_DAYS * 24 * 3600);
    } catch (err) {
      logger.warn(
        { err: (err as Error).message },
        "cannot read the live runs' trainer sessions from the run store; keeping the last ones read",
      );
      return;
    }
    const kept: Array<{ baseUrl: string; apiKey: string; sessionId: string }> = [];
    for (const run of live) {
      try {
        kept.push({ baseUrl: run.trainerBaseUrl, apiKey: apiKey(run.trainerApiKeyEnv), sessionId: run.sessionId });
      } catch (err) {
        if (warned.has(run.runId)) continue;
        warned.add(run.runId);
        logger.warn(
          { runId: run.runId, sessionId: run.sessionId, err: (err as Error).message },
          "this worker cannot keep the run's trainer session alive: it lacks the trainer key",
        );
      }
    }
    // A read that ends after close() must not open keepers again.
    if (!closed) sessions.keepOnly(kept);
  }

  const refresh = () => (reading ??= read().finally(() => (reading = null)));
  void refresh();
  const timer = setInterval(() => void refresh(), (options.everySeconds ?? SESSION_HEARTBEAT_SECONDS) * 1000);
  timer.unref();
  return {
    refresh,
    close: () => {
      closed = true;
      clearInterval(timer);
    },
  };
}
