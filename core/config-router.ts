/** How the router picks the siblings that rescue a dead group, and the voters of its `vote` strategy. */
import { z } from 'zod';
import { ApiKeyEnv, Url } from './config-endpoints';

/** A voter of the `vote` strategy: any OpenAI-compatible endpoint and model. */
export const VoterConfig = z
  .strictObject({
    baseUrl: Url.describe("The voter's OpenAI-compatible endpoint, ending in /v1."),
    model: z.string().min(1).describe('The model the voter endpoint serves.'),
    apiKeyEnv: ApiKeyEnv,
    timeoutSeconds: z
      .number()
      .positive()
      .max(90, 'at most 90: a routing decision must finish inside its 2-minute activity')
      .default(30)
      .describe('Seconds the voter may take to answer; past it the voter is left out of that decision.'),
  })
  .describe('A voter LLM of the vote strategy.');
export type VoterConfig = z.infer<typeof VoterConfig>;

export const ROUTER_STRATEGIES = ['validation', 'vote', 'random', 'all'] as const;
export type RouterStrategy = (typeof ROUTER_STRATEGIES)[number];

export const RouterConfig = z.strictObject({
  strategy: z
    .enum(ROUTER_STRATEGIES)
    .default('validation')
    .describe(
      'How a dead group picks its k rescuing siblings: validation (top-k by the measured behaviour profiles), vote (voter LLMs rank the siblings, Borda count), random (k random siblings) or all (every sibling); the last two are for ablations.',
    ),
  voters: z.array(VoterConfig).default([]).describe('The voter LLMs of the vote strategy (at least one for vote).'),
  probeTasksPerKind: z
    .number()
    .int()
    .min(1)
    .default(4)
    .describe("Tasks per task kind in the probe pass that measures each harness's behaviour profile at run start."),
  probeRollouts: z.number().int().min(1).default(4).describe('Rollouts per (probe task, harness) in the probe pass.'),
  priorStrength: z
    .number()
    .min(0)
    .default(2)
    .describe("Pseudo-attempts of the profiles' prior, so a harness with thin evidence is not over-trusted."),
  reanchorEvery: z
    .number()
    .int()
    .min(0)
    .default(5)
    .describe('Measure the profiles again with the current policy every this many steps; 0: never.'),
});
