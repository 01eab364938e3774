/**
 * The policy over a run's inference replicas: each turn leased from the
 * process's ReplicaBalancer, sent with the OpenAI-compatible client, and, when
 * the replica is to blame for a failure (it cannot be reached, times out,
 * answers a server error, or lost the version's adapter), sent again to
 * another replica. Nothing else is retried here: a request the endpoint
 * refuses (a bad model name, a bad key, a prompt too long) fails as before.
 */
import OpenAI from 'openai';
import { type ReplicaBalancer, type ReplicaFault, NoReplicaError } from './replica-balancer';
import { type Policy, PolicyClient, type PolicyReply, type PolicyRequest } from './client';
import type { ReplicaView } from './replicas';

export interface ReplicaPolicyOptions {
  /** The run's replicas, expanded (ReplicaAddresses). */
  servers: readonly string[];
  /** The model the replicas serve without a publish (policy.model). */
  baseModel: string;
  apiKey: string;
  requestTimeoutSeconds: number;
  maxInFlightPerServer: number;
  /** How long a turn waits when no replica can take it before it fails as an outage (the run's longest retry interval). */
  noReplicaSeconds?: number;
}

/** Tries of one turn on replicas that fail it before the turn fails (the balancer's wait for a healthy one is separate). */
const MAX_REPLICA_TRIES = 12;

export class ReplicaPolicy {
  private readonly clients = new Map<string, PolicyClient>();

  constructor(
    private readonly balancer: ReplicaBalancer,
    private readonly options: ReplicaPolicyOptions,
  ) {}

  /** A policy for one episode: its turns stay on one replica while it can take them. */
  episode(signal?: AbortSignal): Policy {
    let replica: string | undefined;
    return {
      complete: async (request) => {
        const { reply, servedBy } = await this.complete(request, replica, signal);
        replica = servedBy;
        return reply;
      },
    };
  }

  /** How this process sees the run's replicas. */
  views(): ReplicaView[] {
    return this.balancer.views(this.options.servers);
  }

  private async complete(
    request: PolicyRequest,
    preferred: string | undefined,
    signal?: AbortSignal,
  ): Promise<{ reply: PolicyReply; servedBy: string }> {
    const { servers, baseModel, maxInFlightPerServer } = this.options;
    let lastFault = '';
    for (let attempt = 0; attempt < MAX_REPLICA_TRIES; attempt++) {
      const noReplicaMs = this.options.noReplicaSeconds === undefined ? undefined : this.options.noReplicaSeconds * 1000;
      const lease = await this.balancer.acquire({
        servers,
        model: request.model,
        baseModel,
        preferred,
        maxInFlight: maxInFlightPerServer,
        noReplicaMs,
        apiKey: this.options.apiKey,
        signal,
      });
      // One signal for the request: the episode's (cancelled) or the lease's (the replica found dead meanwhile).
      const cancel = new AbortController();
      const abort = () => cancel.abort();
      signal?.addEventListener('abort', abort, { once: true });
      lease.signal.addEventListener('abort', abort, { once: true });
      try {
        const reply = await this.client(lease.replica).complete(request, { signal: cancel.signal });
        lease.release('ok');
        return { reply, servedBy: lease.replica };
      } catch (err) {
        if (lease.signal.aborted && !signal?.aborted) {
          // The balancer found the replica dead while this request waited on it (and took it out already): elsewhere.
          lease.release('unreachable');
          lastFault = `${lease.replica}: ${(lease.signal.reason as Error).message}`;
          preferred = undefined;
          continue;
        }
        const fault = replicaFault(err, request.model, baseModel);
        if (fault === null || signal?.aborted) {
          lease.release('error');
          throw err;
        }
        lease.release(fault);
        lastFault = `${lease.replica}: ${(err as Error).message}`;
        this.balancer.fault(lease.replica, request.model, fault, (err as Error).message);
        preferred = undefined;
      } finally {
        signal?.removeEventListener('abort', abort);
        lease.signal.removeEventListener('abort', abort);
      }
    }
    throw new NoReplicaError(`a turn for ${request.model} failed on ${MAX_REPLICA_TRIES} replicas in a row; the last: ${lastFault}`);
  }

  private client(replica: string): PolicyClient {
    let client = this.clients.get(replica);
    if (!client) {
      // No retries of its own: a failed request goes to another replica instead.
      client = new PolicyClient({
        baseUrl: replica,
        apiKey: this.options.apiKey,
        requestTimeoutSeconds: this.options.requestTimeoutSeconds,
        maxRetries: 0,
      });
      this.clients.set(replica, client);
    }
    return client;
  }
}

/**
 * Whether a failed request is the replica's fault: it cannot be reached, timed
 * out, answered a server error, or answered 404 for a published version (it
 * lost the adapter). A 404 for the base model means the config names a model
 * the servers do not have: the request's fault.
 */
export function replicaFault(err: unknown, model: string, baseModel: string): ReplicaFault | null {
  if (err instanceof OpenAI.APIUserAbortError) return null;
  if (err instanceof OpenAI.APIConnectionTimeoutError) return 'timeout';
  if (err instanceof OpenAI.APIConnectionError) return 'unreachable';
  if (err instanceof OpenAI.APIError && typeof err.status === 'number') {
    if (err.status === 404 && model !== baseModel) return 'lost_adapter';
    if (err.status >= 500 || err.status === 429) return 'server_error';
  }
  return null;
}
