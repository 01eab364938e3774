/** How the router picks the siblings that rescue a dead group, and the voters of its `vote` strategy. */
import { z } from 'zod';
import { ApiKeyEnv, Url } from './config-endpoints';

/** A voter of the `vote` strategy: any OpenAI-compatible endpoint and model. */
export const VoterConfig = z.strictObject({
  baseUrl: Url,
  model: z.string().min(1),
  apiKeyEnv: ApiKeyEnv,
  /** Seconds the voter may take; past it the voter is dropped for that decision. */
  timeoutSeconds: z.number().positive().max(90, 'at most 90: a routing decision must finish inside its 2-minute activity').default(30),
});
export type VoterConfig = z.infer<typeof VoterConfig>;

export const ROUTER_STRATEGIES = ['validation', 'vote', 'random', 'all'] as const;
export type RouterStrategy = (typeof ROUTER_STRATEGIES)[number];

export const RouterConfig = z.strictObject({
  /**
   * validation: top-k by profile evidence; vote: voter LLMs rank the siblings (Borda count);
   * random: k random siblings; all: every sibling (the last two for ablations).
   */
  strategy: z.enum(ROUTER_STRATEGIES).default('validation'),
  /** The voter LLMs of the `vote` strategy. */
  voters: z.array(VoterConfig).default([]),
  /** Tasks per kind in the probe pass that measures the behaviour profiles at run start. */
  probeTasksPerKind: z.number().int().min(1).default(4),
  /** Rollouts per (probe task, harness). */
  probeRollouts: z.number().int().min(1).default(4),
  /** Pseudo-attempts of the prior, so thin evidence is not over-trusted. */
  priorStrength: z.number().min(0).default(2),
  /** M: re-measure the profiles with the current policy every M steps (0: never). */
  reanchorEvery: z.number().int().min(0).default(5),
});
