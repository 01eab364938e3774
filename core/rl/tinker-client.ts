/**
 * A client for the subset of the Tinker REST API a training step needs, so any
 * Tinker-compatible trainer (SkyRL's Tinker server, verl behind one, hosted
 * Tinker, the sim cluster) can train the policy. Every call carries an
 * idempotency key, so a retried activity never applies an update twice.
 */
import type { Datum } from './datums';

export interface AdamParams {
  learning_rate: number;
  beta1: number;
  beta2: number;
  eps: number;
}

export class TrainerError extends Error {
  override name = 'TrainerError';
  constructor(
    message: string,
    /** 'user': the request is wrong and retrying will not help. */
    readonly category: 'user' | 'server',
  ) {
    super(message);
  }
}

export interface TinkerClientOptions {
  baseUrl: string;
  apiKey: string;
  pollSeconds: number;
  /** Called while futures are pending (the activity heartbeats here). */
  onPoll?: () => void;
}

export class TinkerClient {
  constructor(private readonly options: TinkerClientOptions) {}

  async createModel(baseModel: string, loraRank: number, idempotencyKey: string): Promise<string> {
    const result = await this.submit<{ model_id: string }>(
      'create_model',
      { base_model: baseModel, lora_config: { rank: loraRank } },
      idempotencyKey,
    );
    return result.model_id;
  }

  forwardBackward(modelId: string, data: Datum[], idempotencyKey: string) {
    return this.submit<{ metrics?: Record<string, number> }>(
      'forward_backward',
      { model_id: modelId, forward_backward_input: { data, loss_fn: 'importance_sampling' } },
      idempotencyKey,
    );
  }

  optimStep(modelId: string, adam: AdamParams, idempotencyKey: string) {
    return this.submit<{ metrics?: Record<string, number> }>('optim_step', { model_id: modelId, adam_params: adam }, idempotencyKey);
  }

  async saveWeightsForSampler(modelId: string, name: string, idempotencyKey: string): Promise<string> {
    const result = await this.submit<{ path: string }>('save_weights_for_sampler', { model_id: modelId, path: name }, idempotencyKey);
    return result.path;
  }

  /** POSTs an op that returns a future, then polls retrieve_future until it resolves. */
  private async submit<T>(op: string, body: unknown, idempotencyKey: string): Promise<T> {
    const future = await this.post<{ request_id?: string }>(op, body, idempotencyKey);
    if (!future.request_id) throw new TrainerError(`trainer ${op}: response has no request_id`, 'server');
    for (;;) {
      this.options.onPoll?.();
      const response = await this.request('retrieve_future', { request_id: future.request_id });
      const result = (await response.json().catch(() => ({}))) as Record<string, unknown>;
      const pending = response.status === 408 || result.type === 'try_again';
      if (!pending) {
        // A future the trainer no longer knows (it restarted) is not the request's fault: retry the activity,
        // which resubmits under the same idempotency key.
        if (response.status === 404) throw new TrainerError(`trainer ${op}: future ${future.request_id} is unknown to the trainer (restarted?)`, 'server');
        if (!response.ok) throw this.httpError('retrieve_future', response.status, result);
        if (typeof result.error === 'string') {
          throw new TrainerError(`trainer ${op} failed: ${result.error}`, result.category === 'user' ? 'user' : 'server');
        }
        return result as T;
      }
      await new Promise((resolve) => setTimeout(resolve, this.options.pollSeconds * 1000));
    }
  }

  private async post<T>(op: string, body: unknown, idempotencyKey: string): Promise<T> {
    const response = await this.request(op, body, idempotencyKey);
    const result = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    if (!response.ok) throw this.httpError(op, response.status, result);
    return result as T;
  }

  private request(op: string, body: unknown, idempotencyKey?: string): Promise<Response> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-api-key': this.options.apiKey,
      authorization: `Bearer ${this.options.apiKey}`,
    };
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    return fetch(`${this.options.baseUrl.replace(/\/$/, '')}/api/v1/${op}`, { method: 'POST', headers, body: JSON.stringify(body) });
  }

  private httpError(op: string, status: number, body: Record<string, unknown>): TrainerError {
    const detail = typeof body.detail === 'string' ? body.detail : JSON.stringify(body);
    return new TrainerError(`trainer ${op}: HTTP ${status}: ${detail}`, status >= 400 && status < 500 && status !== 429 ? 'user' : 'server');
  }
}
