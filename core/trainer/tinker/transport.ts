/**
 * The HTTP side of the Tinker client: requests with JSON or protobuf bodies,
 * sent again with backoff while the server cannot be reached, and the reading
 * of replies (JSON bodies are validated with zod). Every request honours the
 * caller's AbortSignal.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { formatZodError } from '../../zod-errors';
import { countTrainerRetry } from '../../metrics';
import { errorMessage, PROTOBUF_CONTENT_TYPE } from './wire';
import { TrainerError, TrainerModelGoneError } from './errors';

export interface TinkerClientOptions {
  baseUrl: string;
  apiKey: string;
  /** Seconds between polls of a future the server says is not done. */
  pollSeconds: number;
  /** Aborts every request in flight (the activity's cancellation). */
  signal?: AbortSignal;
  /** First wait, in seconds, before a request to an unreachable server is tried again (doubling up to 30 s). */
  connectionRetrySeconds?: number;
  /** The longest wait between two attempts to reach the server (30 s when absent); a run's `retry.maxIntervalSeconds`. */
  maxConnectionRetrySeconds?: number;
  /** Seconds one HTTP request may take; a long poll past it is simply polled again. */
  requestTimeoutSeconds?: number;
}

export interface HttpReply {
  status: number;
  contentType: string;
  body: Buffer;
  headers: Headers;
}

/** Consecutive connection failures before an op gives up (about two minutes of backoff). */
const MAX_CONNECTION_FAILURES = 8;
/**
 * A model-bound op's 404 when the trainer does not know the model: SkyRL's and
 * the sim's "Model not found", SkyRL's save routes' "Model '<id>' not found".
 * Anchored at the start so "Checkpoint not found: <model>/<name>" is not one.
 */
const MODEL_NOT_FOUND = /^model\b[^:]*\bnot (?:found|loaded)\b/i;

/** The HTTP transport TinkerFutures and then TinkerClient are built on. */
export abstract class TinkerTransport {
  protected readonly base: string;

  constructor(protected readonly options: TinkerClientOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '');
  }

  get baseUrl(): string {
    return this.base;
  }

  /** Retries `attempt` while the server cannot be reached, with backoff; an unreachable server ends in one clear error. */
  protected async withConnectionRetries<T>(op: string, attempt: () => Promise<T>): Promise<T> {
    for (let failures = 0; ; failures++) {
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof UnreachableError)) throw err;
        if (failures + 1 >= MAX_CONNECTION_FAILURES) {
          throw new TrainerError(`trainer ${this.base} is unreachable (${op}): ${err.message}`, 'server');
        }
        countTrainerRetry(routeOf(op), 'unreachable');
        await this.pause(
          Math.min(this.options.maxConnectionRetrySeconds ?? 30, (this.options.connectionRetrySeconds ?? 1) * 2 ** failures),
        );
      }
    }
  }

  /** A request, sent again with backoff while the server cannot be reached. */
  protected request(
    method: 'GET' | 'POST' | 'DELETE',
    op: string,
    body?: unknown,
    options: { redirect?: 'follow' | 'manual' } = {},
  ): Promise<HttpReply> {
    return this.withConnectionRetries(op, () => this.send(method, op, body, options));
  }

  protected async send(
    method: 'GET' | 'POST' | 'DELETE',
    op: string,
    body?: unknown,
    options: { longPoll?: boolean; redirect?: 'follow' | 'manual' } = {},
  ): Promise<HttpReply> {
    const headers: Record<string, string> = { 'x-api-key': this.options.apiKey, authorization: `Bearer ${this.options.apiKey}` };
    let payload: Uint8Array | string | undefined;
    if (body instanceof Uint8Array) {
      headers['content-type'] = PROTOBUF_CONTENT_TYPE;
      payload = body;
    } else if (body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    if (op === 'retrieve_future') headers.accept = `${PROTOBUF_CONTENT_TYPE}, application/json`;
    const timeoutSeconds = this.options.requestTimeoutSeconds ?? (options.longPoll ? 60 : 120);
    const timeout = AbortSignal.timeout(timeoutSeconds * 1000);
    const signal = this.options.signal ? AbortSignal.any([this.options.signal, timeout]) : timeout;
    try {
      const response = await fetch(`${this.base}/api/v1/${op}`, {
        method,
        headers,
        body: payload,
        signal,
        redirect: options.redirect ?? 'follow',
      });
      return {
        status: response.status,
        contentType: (response.headers.get('content-type') ?? '').toLowerCase(),
        headers: response.headers,
        body: Buffer.from(await response.arrayBuffer()),
      };
    } catch (err) {
      this.options.signal?.throwIfAborted();
      if (timeout.aborted) {
        if (options.longPoll) throw new PollTimeout();
        throw new UnreachableError(`no answer to ${op} within ${timeoutSeconds} s`);
      }
      throw new UnreachableError(describeFetchError(err));
    }
  }

  protected async fetchUrl(url: string): Promise<HttpReply> {
    const signal = this.options.signal
      ? AbortSignal.any([this.options.signal, AbortSignal.timeout(600_000)])
      : AbortSignal.timeout(600_000);
    try {
      const response = await fetch(url, { signal, headers: url.startsWith(this.base) ? { 'x-api-key': this.options.apiKey } : {} });
      return {
        status: response.status,
        contentType: response.headers.get('content-type') ?? '',
        headers: response.headers,
        body: Buffer.from(await response.arrayBuffer()),
      };
    } catch (err) {
      this.options.signal?.throwIfAborted();
      throw new TrainerError(`trainer ${this.base}: cannot download ${url}: ${describeFetchError(err)}`, 'server');
    }
  }

  /** expectOk for an op on a model: a 404 saying the model is not found means the trainer lost it. */
  protected expectModelOk(op: string, modelId: string, reply: HttpReply): unknown {
    if (reply.status === 404 && MODEL_NOT_FOUND.test(this.detail(reply))) {
      throw new TrainerModelGoneError(this.modelGoneMessage(op, modelId, `HTTP 404: ${this.detail(reply)}`), modelId);
    }
    return this.expectOk(op, reply);
  }

  protected modelGoneMessage(op: string, modelId: string, answer: string): string {
    return (
      `trainer ${this.base}: ${op} failed: ${answer}: the trainer no longer has model ${modelId} (it restarted without it, ` +
      'or the session that owned it went silent past its timeout); retrying cannot help: restore the run from a training checkpoint'
    );
  }

  protected expectOk(op: string, reply: HttpReply): unknown {
    if (reply.status >= 200 && reply.status < 300) return this.parseBody(op, reply);
    const detail = this.detail(reply);
    if (reply.status === 409) {
      throw new TrainerError(
        `trainer ${this.base}: ${op}: HTTP 409: ${detail}: the model already had another request under this seq_id ` +
          '(another client trains this model, or the run store lost its trainer_ops ledger); the run cannot go on safely on this model',
        'user',
      );
    }
    const user = reply.status >= 400 && reply.status < 500 && reply.status !== 408 && reply.status !== 429;
    const hint =
      reply.status === 404 && !/model|session|checkpoint|future|sampler/i.test(detail)
        ? ` (no /api/v1/${op} there: is trainer.baseUrl a Tinker API server, such as SkyRL's or hosted Tinker?)`
        : '';
    throw new TrainerError(`trainer ${this.base}: ${op}: HTTP ${reply.status}: ${detail}${hint}`, user ? 'user' : 'server');
  }

  protected parseBody(op: string, reply: HttpReply): unknown {
    if (reply.body.length === 0) return undefined;
    try {
      return JSON.parse(reply.body.toString('utf8'));
    } catch {
      throw new TrainerError(
        `trainer ${this.base}: ${op} answered HTTP ${reply.status} with a body that is not JSON (${reply.contentType || 'no content type'}): ` +
          `${reply.body.toString('utf8', 0, 200)}`,
        'user',
      );
    }
  }

  protected parseJson<S extends z.ZodType>(op: string, schema: S, value: unknown): z.infer<S> {
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    throw new TrainerError(
      `trainer ${this.base}: ${op} answered with a body this client does not understand ` +
        `(is it a Tinker API server of SDK >= 0.25?):\n${formatZodError(parsed.error)}`,
      'user',
    );
  }

  protected detail(reply: HttpReply): string {
    const text = reply.body.toString('utf8');
    try {
      return errorMessage(JSON.parse(text)) ?? text.slice(0, 500);
    } catch {
      return text.slice(0, 500) || '(no body)';
    }
  }

  protected async pause(seconds: number): Promise<void> {
    await sleep(seconds * 1000, undefined, this.options.signal ? { signal: this.options.signal } : undefined);
  }
}

/** A metric label for a request: checkpoint routes name a model and a checkpoint, which would make a label per model. */
function routeOf(op: string): string {
  if (!op.startsWith('training_runs/')) return op;
  return op.endsWith('/archive') ? 'checkpoint_archive' : op.includes('/checkpoints/weights/') ? 'delete_checkpoint' : 'list_checkpoints';
}

export class UnreachableError extends Error {}
export class PollTimeout extends Error {}

function describeFetchError(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  if (cause?.code) return `${cause.code}${cause.message ? ` (${cause.message})` : ''}`;
  return cause?.message ?? (err as Error).message;
}
