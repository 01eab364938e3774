/**
 * The clients activities talk to endpoints with, built from a run's config
 * and this worker's secrets (core/secrets.ts). Injected through
 * createActivities(deps), so a test or a worker can pass its own.
 */
import type { RunConfig } from '../core/config';
import type { ReplicaBalancer } from '../core/policy/replica-balancer';
import { ReplicaPolicy } from '../core/policy/replica-policy';
import { TinkerClient } from '../core/trainer/tinker/client';
import { apiKeyOf } from '../core/secrets';

export interface ActivityClients {
  /** The policy over the run's inference replicas (vLLM, the sim cluster), `servers` expanded from its config, balanced by `balancer`. */
  policy(config: RunConfig, balancer: ReplicaBalancer, servers: readonly string[]): ReplicaPolicy;
  /** The run's Tinker-compatible trainer; its requests abort with `signal`. */
  trainer(config: RunConfig, signal?: AbortSignal): TinkerClient;
  /** The key of the inference servers a policy version is published to. */
  policyApiKey(config: RunConfig): string;
  /** The key of the trainer (for its session keeper). */
  trainerApiKey(config: RunConfig): string;
}

export const defaultClients: ActivityClients = {
  policy: (config, balancer, servers) =>
    new ReplicaPolicy(balancer, {
      servers,
      baseModel: config.policy.model,
      apiKey: apiKeyOf(config.policy, 'policy'),
      requestTimeoutSeconds: config.policy.requestTimeoutSeconds,
      maxInFlightPerServer: config.policy.maxInFlightPerServer,
      // With no replica to take it, a turn waits as long as the run's longest retry interval, then fails as an outage.
      noReplicaSeconds: config.retry.maxIntervalSeconds,
    }),
  trainer: (config, signal) =>
    new TinkerClient({
      baseUrl: config.trainer.baseUrl,
      apiKey: apiKeyOf(config.trainer, 'trainer'),
      pollSeconds: config.trainer.pollSeconds,
      signal,
      maxConnectionRetrySeconds: config.retry.maxIntervalSeconds,
    }),
  policyApiKey: (config) => apiKeyOf(config.policy, 'policy'),
  trainerApiKey: (config) => apiKeyOf(config.trainer, 'trainer'),
};
