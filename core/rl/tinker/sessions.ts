/**
 * Tinker sessions of one worker process. A Tinker server unloads the models
 * of a session that stops sending heartbeats (SkyRL: after 300 s), so the
 * process keeps a session per trainer and heartbeats it on a clock for as
 * long as it lives, like the SDK does; it also heartbeats the sessions that
 * own the models it trains (a model created by an earlier process of this
 * worker belongs to that process's session). A session the server no longer
 * knows (404) is dropped and a new one is opened on next use. SkyRL 0.4 keeps
 * an expired session's record and answers its heartbeats with 200, so there
 * an expiry shows only when an op finds the model gone ("Model ... not
 * loaded"), which fails the run with that reason (client.ts).
 *
 * Sessions are kept for the life of the process: the models of a run that
 * failed or was cancelled stay loaded on the trainer until this worker
 * stops; a run that finishes unloads its model.
 */
import type { Logger } from 'pino';
import { TinkerClient } from './client';

/** How often sessions are kept alive (the SDK's period). */
export const SESSION_HEARTBEAT_SECONDS = 10;

export class TinkerSessionKeeper {
  private current: Promise<string> | null = null;
  private currentId: string | null = null;
  private modelSeqId = 0;
  private readonly kept = new Set<string>();
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
    if (this.currentId === sessionId) {
      this.current = null;
      this.currentId = null;
    }
  }

  /** Keeps a session alive too: the one that owns a model this process trains. */
  keepAlive(sessionId: string): void {
    this.kept.add(sessionId);
  }

  /** Sends one round of heartbeats now (also what the clock does). */
  async beat(): Promise<void> {
    const current = this.current ? await this.current.catch(() => null) : null;
    const ids = new Set([...(current ? [current] : []), ...this.kept]);
    await Promise.all(
      [...ids].map(async (id) => {
        try {
          if ((await this.client.heartbeatSession(id)) === 'alive') return;
          this.logger.warn({ trainer: this.client.baseUrl, sessionId: id }, 'the trainer no longer knows this session (its models are unloaded)');
          this.forget(id);
        } catch (err) {
          this.logger.warn({ trainer: this.client.baseUrl, sessionId: id, err: (err as Error).message }, 'trainer session heartbeat failed');
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

  constructor(private readonly logger: Logger) {}

  for(baseUrl: string, apiKey: string): TinkerSessionKeeper {
    const key = `${baseUrl}\n${apiKey}`;
    let keeper = this.keepers.get(key);
    if (!keeper) {
      keeper = new TinkerSessionKeeper(baseUrl, apiKey, this.logger);
      this.keepers.set(key, keeper);
    }
    return keeper;
  }

  close(): void {
    for (const keeper of this.keepers.values()) keeper.close();
    this.keepers.clear();
  }
}
