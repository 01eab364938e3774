/**
 * The clients activities talk to endpoints with, built from a run's config
 * and this worker's secrets (core/secrets.ts). Injected through
 * createActivities(deps), so a test or a worker can pass its own.
 */
import type { RunConfig } from '../core/config';
import { PolicyClient } from '../core/policy/client';
import { TinkerClient } from '../core/rl/tinker/client';
import { apiKeyOf } from '../core/secrets';

export interface ActivityClients {
  /** The policy's OpenAI-compatible endpoint (vLLM, the sim cluster). */
  policy(config: RunConfig): PolicyClient;
  /** The run's Tinker-compatible trainer; its requests abort with `signal`. */
  trainer(config: RunConfig, signal?: AbortSignal): TinkerClient;
  /** The key of the inference servers a policy version is published to. */
  policyApiKey(config: RunConfig): string;
  /** The key of the trainer (for its session keeper). */
  trainerApiKey(config: RunConfig): string;
}

export const defaultClients: ActivityClients = {
  policy: (config) => new PolicyClient({ ...config.policy, apiKey: apiKeyOf(config.policy, 'policy') }),
  trainer: (config, signal) =>
    new TinkerClient({
      baseUrl: config.trainer.baseUrl, apiKey: apiKeyOf(config.trainer, 'trainer'), pollSeconds: config.trainer.pollSeconds, signal,
      // A config stored before `retry` existed has none: the client's own default.
      maxConnectionRetrySeconds: config.retry?.maxIntervalSeconds,
    }),
  policyApiKey: (config) => apiKeyOf(config.policy, 'policy'),
  trainerApiKey: (config) => apiKeyOf(config.trainer, 'trainer'),
};
