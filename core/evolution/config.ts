/**
 * EvolutionConfig: the single JSON object an evolution (workflow
 * evolveHarnessPool) starts from. Strict like the run config: an unknown key
 * is refused, naming its path. Defaults evolve the sim's base harness with the
 * SIMULATED proposer on the embedded sim cluster.
 */
import { z } from 'zod';
import { ApiKeyEnv, configFileSchema, EnvConfig, PolicyConfig, RetryConfig, SIM_CLUSTER_URL, Url } from '../config';
import { RepairDirection } from '../harness/direction';
import { formatIssues, zodErrorPaths, zodIssues, type ConfigIssue } from '../zod-errors';
import { UserError } from '../errors';
import { SIBLING_DIRECTIONS } from './failure-directions';
import { isSimulatedEnv, SIM_KIND } from '../sim-kind';

/** A proposer: any OpenAI-compatible chat endpoint and model (a hosted LLM, vLLM, or the sim cluster's `sim-proposer`). */
export const ProposerConfig = z
  .strictObject({
    baseUrl: Url.describe(
      "The proposer's OpenAI-compatible chat endpoint, ending in /v1 (the sim cluster's for the SIMULATED sim-proposer).",
    ),
    model: z
      .string()
      .min(1)
      .describe('The model the proposer endpoint serves (sim-proposer: the SIMULATED proposer, for the sim env only).'),
    apiKeyEnv: ApiKeyEnv,
    temperature: z.number().min(0).max(2).default(0.7).describe("Sampling temperature of the proposer's answers."),
    timeoutSeconds: z.number().positive().max(600).default(120).describe('Seconds one answer may take before it is retried.'),
    maxTokens: z.number().int().min(1).default(4096).describe('Tokens the proposer may generate per answer (max_tokens).'),
  })
  .describe('A proposer LLM: it reads failing trajectories and writes candidate harness specs.');
export type ProposerConfig = z.infer<typeof ProposerConfig>;

/** The policy that acts under the candidates: the same endpoint and sampling a run uses. */
export const ExecutorConfig = PolicyConfig.pick({
  baseUrl: true,
  model: true,
  apiKeyEnv: true,
  temperature: true,
  requestTimeoutSeconds: true,
}).extend({
  baseUrl: PolicyConfig.shape.baseUrl.describe(
    "The executor's OpenAI-compatible endpoint, ending in /v1 (vLLM; the default is the SIMULATED sim cluster).",
  ),
  model: PolicyConfig.shape.model.describe(
    'The model the executor endpoint serves: the base model the runs will train (the default is the SIMULATED policy).',
  ),
});

const SiblingDirection = RepairDirection.exclude(['base']).describe(
  'A repair direction: action_realization, environment_contract, trajectory_regulation or procedural_skill.',
);
export const SIM_PROPOSER = 'sim-proposer';

const FailureType = z
  .enum(['format_error', 'execution_error', 'wrong_answer', 'turn_limit', 'policy_error'])
  .describe('A failure type of a rollout.');

export const EvolutionConfig = z
  .strictObject({
    /** The evolution's id: a second start with the same name resumes it (same config) or is refused (another config). */
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'letters, digits, . _ - (up to 63)')
      .default('sim-evolve')
      .describe("The evolution's id: a second start with the same name resumes it (same config) or is refused (another config)."),
    env: EnvConfig.default({ kind: SIM_KIND }).describe(
      'The environment whose harness pool is evolved, as in a run config; the SIMULATED sim world by default.',
    ),
    base: z
      .string()
      .min(1)
      .optional()
      .describe(
        "A harness spec file (the env's spec format) to evolve from; the env's own base harness (or its frozen pool's) when absent.",
      ),
    executor: ExecutorConfig.prefault({}).describe(
      "The policy that acts under the base harness and the candidates: the endpoint and sampling a run's policy section gives (the SIMULATED policy by default).",
    ),
    proposers: z
      .array(ProposerConfig)
      .min(1)
      .default([{ baseUrl: `${SIM_CLUSTER_URL}/v1`, model: SIM_PROPOSER, temperature: 0.7, timeoutSeconds: 120, maxTokens: 4096 }])
      .describe(
        "The proposer LLMs, taken in turn by a round's candidate slots; the default is the SIMULATED sim-proposer, for the sim env only.",
      ),
    directions: z
      .array(SiblingDirection)
      .min(1)
      .refine((d) => new Set(d).size === d.length, 'list each direction once')
      .default([...SIBLING_DIRECTIONS])
      .describe('The repair directions to evolve a sibling along, each listed once; all four by default.'),
    rounds: z
      .number()
      .int()
      .min(1)
      .max(10)
      .default(2)
      .describe("Rounds of propose, validate and select; each round's best candidate per direction parents the next round."),
    candidatesPerDirection: z.number().int().min(1).max(10).default(3).describe('Candidates proposed per direction per round.'),
    rolloutsPerTask: z
      .number()
      .int()
      .min(1)
      .default(4)
      .describe('G: rollouts per (harness, task), in the diagnosis and in every validation.'),
    maxTurns: z.number().int().min(1).default(5).describe('The most executor turns one episode may take.'),
    maxTokens: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe("Tokens the executor may generate per assistant turn (max_tokens); the inference server's limit when absent."),
    concurrency: z.number().int().min(1).default(8).describe('Rollouts run at once inside one group activity.'),
    dev: z
      .strictObject({
        tasksPerKind: z.number().int().min(1).default(8).describe('Dev tasks per task kind, drawn from the training split.'),
        heldOut: z
          .number()
          .min(0)
          .max(0.9)
          .default(0.2)
          .describe('The eval share the runs will hold out (their eval.heldOut): dev tasks never come from it.'),
      })
      .prefault({})
      .describe('The dev split the evolution diagnoses and validates on.'),
    regressionTasks: z
      .number()
      .int()
      .min(0)
      .default(8)
      .describe('Tasks the base harness solves that every candidate is also run on, to see what it breaks.'),
    regressionPenalty: z
      .number()
      .min(0)
      .default(1)
      .describe("A candidate's score is its rescue rate on its targets minus this times its regression rate."),
    proposalRetries: z
      .number()
      .int()
      .min(0)
      .max(5)
      .default(2)
      .describe(
        'How often a refused answer (an invalid or off-direction spec) is sent back with the reason before the candidate is dropped.',
      ),
    failuresInPrompt: z.number().int().min(1).max(20).default(4).describe('Failing trajectories shown to a proposer.'),
    turnChars: z.number().int().min(80).default(600).describe('Characters of each turn of a failing trajectory shown to a proposer.'),
    failureDirections: z
      .partialRecord(FailureType, z.array(SiblingDirection).describe('The directions this failure type calls for.'))
      .default({})
      .describe(
        "Which directions a failure type calls for, per failure type, over the env's mapping (core/evolution/failure-directions.ts).",
      ),
    retry: RetryConfig.prefault({}).describe('How long an activity that calls an endpoint keeps trying.'),
    seed: z.number().int().min(0).default(1).describe('Seed of the dev-task draw, the regression tasks and every rollout.'),
  })
  .superRefine((config, ctx) => {
    if (isSimulatedEnv(config.env.kind)) return;
    config.proposers.forEach((p, i) => {
      if (p.model === SIM_PROPOSER) {
        ctx.addIssue({
          code: 'custom',
          path: ['proposers', i, 'model'],
          message: `the SIMULATED ${SIM_PROPOSER} proposes sim harnesses only; env '${config.env.kind}' needs an LLM proposer (the sim proposer is the default: give "proposers")`,
        });
      }
    });
  });
export type EvolutionConfig = z.infer<typeof EvolutionConfig>;
export type EvolutionConfigInput = z.input<typeof EvolutionConfig>;

export class EvolutionConfigError extends UserError {
  constructor(
    message: string,
    readonly paths: string[],
    /** Each bad field and what is wrong with it, as the message lists them. */
    readonly issues: ConfigIssue[] = [],
  ) {
    super(message);
    this.name = 'EvolutionConfigError';
  }
}

/** Validates an evolution config a user wrote; every bad field is named by its path. */
export function parseEvolutionConfig(raw: unknown, source = 'evolution config'): EvolutionConfig {
  const parsed = EvolutionConfig.safeParse(raw, { reportInput: true });
  if (parsed.success) return parsed.data;
  const issues = zodIssues(parsed.error, EvolutionConfig);
  throw new EvolutionConfigError(`${source} is invalid:\n${formatIssues(issues)}`, zodErrorPaths(parsed.error), issues);
}

/** The JSON Schema of what a user may write (defaults optional). */
export function evolutionConfigJsonSchema(): unknown {
  return z.toJSONSchema(EvolutionConfig, { io: 'input', unrepresentable: 'any' });
}

/** The JSON Schema of an evolution config file (examples/evolution-config.schema.json): the wrapper, the config and every field's description. */
export function evolutionConfigFileJsonSchema(): unknown {
  const file = configFileSchema(EvolutionConfig, {
    title: 'Harness-S evolution config file',
    schemaFile: 'evolution-config.schema.json',
    description:
      'The evolution config (workflow evolveHarnessPool): every field may be left out for its default ({} evolves the SIMULATED sim env with the SIMULATED proposer).',
  });
  return z.toJSONSchema(file, { io: 'input', unrepresentable: 'any' });
}
