/**
 * EvolutionConfig: the single JSON object an evolution (workflow
 * evolveHarnessPool) starts from. Strict like the run config: an unknown key
 * is refused, naming its path. Defaults evolve the sim's base harness with the
 * SIMULATED proposer on the embedded sim cluster.
 */
import { z } from 'zod';
import { ApiKeyEnv, EnvConfig, PolicyConfig, RetryConfig, SIM_CLUSTER_URL, Url } from '../config';
import { RepairDirection } from '../harness/direction';
import { formatZodError, zodErrorPaths } from '../zod-errors';
import { UserError } from '../errors';
import { SIBLING_DIRECTIONS } from './failure-directions';
import { isSimulatedEnv, SIM_KIND } from '../sim-kind';

/** A proposer: any OpenAI-compatible chat endpoint and model (a hosted LLM, vLLM, or the sim cluster's `sim-proposer`). */
export const ProposerConfig = z.strictObject({
  baseUrl: Url,
  model: z.string().min(1),
  apiKeyEnv: ApiKeyEnv,
  temperature: z.number().min(0).max(2).default(0.7),
  /** Seconds one answer may take before it is retried. */
  timeoutSeconds: z.number().positive().max(600).default(120),
  maxTokens: z.number().int().min(1).default(4096),
});
export type ProposerConfig = z.infer<typeof ProposerConfig>;

/** The policy that acts under the candidates: the same endpoint and sampling a run uses. */
export const ExecutorConfig = PolicyConfig.pick({
  baseUrl: true,
  model: true,
  apiKeyEnv: true,
  temperature: true,
  requestTimeoutSeconds: true,
});

const SiblingDirection = RepairDirection.exclude(['base']);
const SIM_PROPOSER = 'sim-proposer';

const FailureType = z.enum(['format_error', 'execution_error', 'wrong_answer', 'turn_limit', 'policy_error']);

export const EvolutionConfig = z
  .strictObject({
    /** The evolution's id: a second start with the same name resumes it (same config) or is refused (another config). */
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'letters, digits, . _ - (up to 63)')
      .default('sim-evolve'),
    env: EnvConfig.default({ kind: SIM_KIND }),
    /** A harness spec file (the env's spec format) to evolve from; the env's own base harness when absent. */
    base: z.string().min(1).optional(),
    executor: ExecutorConfig.prefault({}),
    proposers: z
      .array(ProposerConfig)
      .min(1)
      .default([{ baseUrl: `${SIM_CLUSTER_URL}/v1`, model: SIM_PROPOSER, temperature: 0.7, timeoutSeconds: 120, maxTokens: 4096 }]),
    directions: z
      .array(SiblingDirection)
      .min(1)
      .refine((d) => new Set(d).size === d.length, 'list each direction once')
      .default([...SIBLING_DIRECTIONS]),
    rounds: z.number().int().min(1).max(10).default(2),
    /** Candidates proposed per direction per round. */
    candidatesPerDirection: z.number().int().min(1).max(10).default(3),
    /** G: rollouts per (harness, task), in the diagnosis and in every validation. */
    rolloutsPerTask: z.number().int().min(1).default(4),
    maxTurns: z.number().int().min(1).default(5),
    maxTokens: z.number().int().min(1).optional(),
    /** Rollouts run at once inside one group activity. */
    concurrency: z.number().int().min(1).default(8),
    dev: z
      .strictObject({
        /** Dev tasks per kind, drawn from the training split. */
        tasksPerKind: z.number().int().min(1).default(8),
        /** The eval share the runs will hold out (their eval.heldOut): dev tasks never come from it. */
        heldOut: z.number().min(0).max(0.9).default(0.2),
      })
      .prefault({}),
    /** Tasks the base harness solves that every candidate is also run on, to see what it breaks. */
    regressionTasks: z.number().int().min(0).default(8),
    /** Score = rescue rate on targets - penalty x regression rate. */
    regressionPenalty: z.number().min(0).default(1),
    /** How often a refused answer (invalid or off-direction spec) is sent back with the reason before the candidate is dropped. */
    proposalRetries: z.number().int().min(0).max(5).default(2),
    /** Failing trajectories shown to a proposer, and how many characters of each turn. */
    failuresInPrompt: z.number().int().min(1).max(20).default(4),
    turnChars: z.number().int().min(80).default(600),
    /** Which directions a failure type calls for; overrides the env's mapping (core/evolution/failure-directions.ts) per failure type. */
    failureDirections: z.partialRecord(FailureType, z.array(SiblingDirection)).default({}),
    retry: RetryConfig.prefault({}),
    seed: z.number().int().min(0).default(1),
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
  ) {
    super(message);
    this.name = 'EvolutionConfigError';
  }
}

/** Validates an evolution config a user wrote; every bad field is named by its path. */
export function parseEvolutionConfig(raw: unknown, source = 'evolution config'): EvolutionConfig {
  const parsed = EvolutionConfig.safeParse(raw);
  if (parsed.success) return parsed.data;
  throw new EvolutionConfigError(`${source} is invalid:\n${formatZodError(parsed.error, EvolutionConfig)}`, zodErrorPaths(parsed.error));
}

/** The JSON Schema of what a user may write (defaults optional). */
export function evolutionConfigJsonSchema(): unknown {
  return z.toJSONSchema(EvolutionConfig, { io: 'input', unrepresentable: 'any' });
}
