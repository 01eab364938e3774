/**
 * The SIMULATED trainer's state and op queue (trainer-server.ts has the API):
 * exactly-once ops by seq_id, futures kept on disk, long-polled retrieval.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { type PolicyParams, SimPolicyInputError, SimPolicyModel } from '../core/envs/sim/policy-model';
import type { SimWorld } from '../core/envs/sim/world';
import { PROTOBUF_CONTENT_TYPE, RetrieveFutureRequest } from '../core/trainer/tinker/wire';
import {
  APPLIED_RETENTION,
  type AppliedOp,
  type FutureRecord,
  type SessionRecord,
  type SimClusterStore,
  type TrainingModelRecord,
} from './checkpoints';
import { SimTrainerUserError } from './learning-rule';
import type { SimHttpReply } from './http';
import type { LatencyModel } from './latency';
import { invalid } from './trainer-requests';

export interface SimTrainerServerDeps {
  world: SimWorld;
  store: SimClusterStore;
  logger: Logger;
  /** Simulated time an op takes before it completes. */
  opDelayMs: number;
  /** SIMULATED GPU time of the ops it times (forward_backward, optim_step, saves), in place of opDelayMs. */
  latency?: LatencyModel;
  /** How long retrieve_future holds a request for a pending future before answering 408. */
  longPollMs?: number;
  /** A session without a heartbeat for this long expires and its models are unloaded (SkyRL: 300 s). */
  sessionTimeoutMs?: number;
}

export interface TrainingModel {
  /** Undefined until its create_model op has run. */
  state?: TrainingModelRecord;
  sessionId: string;
  /** The tail of this model's op queue. */
  queue: Promise<void>;
  /** seq_id -> the op first sent under it; also pending ones. */
  seqs: Map<number, { requestId: string; route: string; bodyHash: string }>;
  /** Requests sent to it besides create_model: load_weights is only its first. */
  requests: number;
}

export type FutureState = { status: 'pending'; waiters: Array<() => void> } | { status: 'done'; record: FutureRecord };

export interface OpOutcome {
  result: FutureRecord['result'];
  /** The model state to commit; undefined when the op changes nothing (forward, sample). */
  next?: TrainingModelRecord;
}

/** The SIMULATED trainer's state (sessions, models, futures) and its op queue: each op runs once, in order per model, and its future is kept. */
export abstract class SimTrainerState {
  protected readonly model: SimPolicyModel;
  protected readonly models = new Map<string, TrainingModel>();
  protected readonly futures = new Map<string, FutureState>();
  protected sessions: Record<string, SessionRecord> = {};
  protected readonly samplingSessions = new Map<string, { sessionId: string; basePath: string | null }>();
  /** (model, checkpoint name) pairs whose save is in flight: a second save of the name is 409 already. */
  protected readonly pendingCheckpoints = new Set<string>();
  /** Checkpoints whose save failed, with the reason (kept in memory: a restart forgets them). */
  protected readonly failedCheckpoints = new Map<string, string>();
  protected sweeper?: NodeJS.Timeout;
  protected readonly longPollMs: number;
  protected readonly sessionTimeoutMs: number;
  protected readonly baseParams: PolicyParams;

  protected constructor(protected readonly deps: SimTrainerServerDeps) {
    this.model = new SimPolicyModel(deps.world);
    this.baseParams = this.model.initialParams();
    this.longPollMs = deps.longPollMs ?? 5000;
    this.sessionTimeoutMs = deps.sessionTimeoutMs ?? 300_000;
  }

  badRequest(message: string): SimHttpReply {
    return { status: 400, json: { detail: message } };
  }

  // ------------------------------------------------------------- futures

  protected async retrieveFuture(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = RetrieveFutureRequest.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const requestId = parsed.data.request_id;
    let future = this.futures.get(requestId);
    if (future?.status === 'pending') {
      const pending = future;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.longPollMs);
        pending.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      future = this.futures.get(requestId);
      if (future?.status === 'pending') return { status: 408, json: { detail: 'Timeout waiting for result' } };
    }
    const record = future?.status === 'done' ? future.record : await this.committedFutureFromDisk(requestId);
    if (!record) return { status: 404, json: { detail: 'Future not found' } };
    const { result } = record;
    if ('proto' in result) return { status: 200, bytes: Buffer.from(result.proto, 'base64'), contentType: PROTOBUF_CONTENT_TYPE };
    if ('json' in result) return { status: 200, json: result.json ?? null };
    return result.category === 'user' ? { status: 400, json: { detail: result.error } } : { status: 200, json: result };
  }

  /** A finished future from an earlier run of the cluster; a success whose op never committed does not count. */
  protected async committedFutureFromDisk(requestId: string): Promise<FutureRecord | undefined> {
    const record = await this.deps.store.readFuture(requestId);
    if (!record) return undefined;
    if ('error' in record.result || record.route === 'forward' || record.route === 'sample') return record;
    const committed = this.models.get(record.modelId)?.state?.applied.some((op) => op.requestId === requestId);
    return committed ? record : undefined;
  }

  /**
   * Answers with a future now and runs `op` on the model's queue later. An
   * op under a seq_id the model has seen returns that op's future (same
   * body) or 409 (another body). The op's result is written before its new
   * state commits; a failure leaves the state as it was.
   */
  protected submit(
    route: string,
    modelId: string,
    seqId: number | null,
    bodyHash: string,
    op: (state: TrainingModelRecord) => Promise<OpOutcome>,
    /** The batch's tokens, for the latency model (forward and forward_backward). */
    tokens = 0,
  ): SimHttpReply {
    const model = this.models.get(modelId)!;
    if (seqId !== null) {
      const seen = model.seqs.get(seqId);
      if (seen && (seen.route !== route || seen.bodyHash !== bodyHash)) {
        return { status: 409, json: { detail: 'Training request sequence number was reused' } };
      }
      if (seen)
        return { status: 200, json: { future_id: seen.requestId, request_id: seen.requestId, status: 'pending', model_id: modelId } };
    }
    const requestId = `${Date.now()}${randomBytes(3).readUIntBE(0, 3)}`;
    if (seqId !== null) model.seqs.set(seqId, { requestId, route, bodyHash });
    if (route !== 'create_model') model.requests += 1;
    this.futures.set(requestId, { status: 'pending', waiters: [] });
    model.queue = model.queue
      .then(() => this.simulatedLatency(route, tokens))
      .then(() => this.runOp({ requestId, route, seqId, bodyHash }, modelId, model, op));
    return { status: 200, json: { future_id: requestId, request_id: requestId, status: 'pending', model_id: modelId } };
  }

  protected async runOp(
    applied: AppliedOp,
    modelId: string,
    model: TrainingModel,
    op: (state: TrainingModelRecord) => Promise<OpOutcome>,
  ): Promise<void> {
    const finish = (result: FutureRecord['result']): FutureRecord => ({
      requestId: applied.requestId,
      modelId,
      route: applied.route,
      finishedAt: new Date().toISOString(),
      result,
    });
    try {
      const current = applied.route === 'create_model' ? undefined : model.state;
      if (applied.route !== 'create_model' && (!current || current.status !== 'loaded')) {
        throw new SimTrainerUserError(
          current
            ? `Model '${modelId}' is not loaded (its session expired or it was unloaded); create a new model`
            : `model '${modelId}' failed to be created`,
        );
      }
      const outcome = await op(current!);
      const record = finish(outcome.result);
      await this.deps.store.writeFuture(record);
      if (outcome.next) {
        const next = { ...outcome.next, applied: [...outcome.next.applied, applied].slice(-APPLIED_RETENTION) };
        await this.deps.store.writeTrainingModel(next);
        model.state = next;
      }
      this.finishFuture(record);
      this.deps.logger.info(
        { op: applied.route, request_id: applied.requestId, model_id: modelId, seq_id: applied.seqId },
        `[SIMULATED] ${applied.route} done`,
      );
    } catch (err) {
      const user = err instanceof SimTrainerUserError || err instanceof SimPolicyInputError;
      const record = finish({ error: (err as Error).message, category: user ? 'user' : 'server' });
      // As SkyRL: the seq_id keeps answering with this failed future; the op is sent again under a new seq_id.
      this.finishFuture(record);
      this.deps.logger.warn(
        { op: applied.route, request_id: applied.requestId, model_id: modelId, err },
        `[SIMULATED] ${applied.route} failed`,
      );
      await this.deps.store
        .writeFuture(record)
        .catch((writeErr) => this.deps.logger.error({ err: writeErr }, 'cannot persist a failed future'));
    }
  }

  protected finishFuture(record: FutureRecord): void {
    const previous = this.futures.get(record.requestId);
    this.futures.set(record.requestId, { status: 'done', record });
    if (previous?.status === 'pending') previous.waiters.forEach((wake) => wake());
  }

  /** The op's time on the latency model when it times it, else opDelayMs. */
  protected simulatedLatency(route: string, tokens: number): Promise<void> {
    const latency = this.deps.latency;
    if (latency?.timesTrainerOp(route)) return latency.trainerOp(route, tokens);
    const ms = this.deps.opDelayMs;
    return new Promise((resolve) => (ms > 0 ? setTimeout(resolve, ms) : setImmediate(resolve)));
  }

  protected freshModel(modelId: string, sessionId: string, lora: TrainingModelRecord['lora']): TrainingModelRecord {
    return {
      version: 2,
      modelId,
      sessionId,
      baseModel: this.deps.world.model.name,
      lora,
      status: 'loaded',
      createdAt: new Date().toISOString(),
      params: this.model.initialParams(),
      grad: this.model.zeroParams(),
      adam: { m: this.model.zeroParams(), v: this.model.zeroParams() },
      optimSteps: 0,
      applied: [],
    };
  }
}
