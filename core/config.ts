/**
 * RunConfig: the single JSON object a Harness-S run starts from.
 *
 * It is validated at every boundary it crosses (CLI, workflow input); inside,
 * code trusts the type. Defaults make the embedded sim cluster the default.
 */
import { z } from 'zod';
import { formatIssues, zodErrorPaths, zodIssues, type ConfigIssue } from './zod-errors';
import { UserError } from './errors';
import { NO_API_KEY } from './secrets';
import { FAILURE_TYPES } from './failure-types';
import { EnvConfig, envFilesNamed } from './envs/env-configs';
import { SIM_KIND } from './sim-kind';
import { TrackingConfig } from './tracking/tracker-configs';
import { STEP_LIMITS } from './rl/step-slices';
import { PUBLISH_VIAS } from './policy/replicas';
import { ApiKeyEnv, SIM_CLUSTER_URL, SIM_POLICY_MODEL, Url } from './config-endpoints';
import { TrainerConfig } from './config-trainer';
import { RouterConfig } from './config-router';
import {
  BudgetConfig,
  CheckpointConfig,
  EvalConfig,
  GrpoConfig,
  HealthConfig,
  PipelineConfig,
  RescueConfig,
  RetryConfig,
  RolloutConfig,
  SamplingConfig,
} from './config-steps';

export { ApiKeyEnv, isSimClusterUrl, SIM_CLUSTER_URL, SIM_POLICY_MODEL, Url } from './config-endpoints';
export { AdamParams, LoraTargets, SIM_LEARNING_RATE, TrainerConfig } from './config-trainer';
export { ROUTER_STRATEGIES, RouterConfig, VoterConfig, type RouterStrategy } from './config-router';
export {
  BudgetConfig,
  CheckpointConfig,
  EvalConfig,
  GrpoConfig,
  HealthConfig,
  PipelineConfig,
  RescueConfig,
  RetryConfig,
  RolloutConfig,
  SAMPLING_REFILLS,
  SamplingConfig,
} from './config-steps';

/**
 * Where frozen pools are kept, as the worker's environment sets it:
 * $HARNESS_S_POOLS_DIR, else .data/pools under the working directory.
 * core/harness/frozen-pool.ts resolves it (`poolsRoot`); this module stays
 * free of node built-ins, as the workflow bundle holds it.
 */
export function poolsDirSetting(): string {
  return process.env.HARNESS_S_POOLS_DIR || '.data/pools';
}

export { EnvConfig } from './envs/env-configs';

export const PolicyConfig = z.strictObject({
  baseUrl: Url.default(`${SIM_CLUSTER_URL}/v1`).describe(
    "The policy's OpenAI-compatible endpoint, ending in /v1 (vLLM; the default is the SIMULATED sim cluster): the run's one inference server when inferenceServers is empty.",
  ),
  model: z
    .string()
    .min(1)
    .default(SIM_POLICY_MODEL)
    .describe(
      'The base model id the endpoint serves: step 0 rolls out with it and the trainer trains a LoRA on it; the default is the SIMULATED policy.',
    ),
  apiKeyEnv: ApiKeyEnv,
  temperature: z.number().min(0).max(2).default(1).describe('Sampling temperature of every rollout turn.'),
  /**
   * Every inference server (replica) of the run: each takes rollouts (balanced by requests in flight, an
   * episode's turns on one replica) and gets each new policy version. baseUrl alone when empty. A URL whose
   * host name resolves to several addresses (Compose's `--scale vllm=3`) is one replica per address.
   */
  inferenceServers: z
    .array(Url.describe('An inference server: an OpenAI-compatible endpoint ending in /v1.'))
    .default([])
    .describe(
      "Every inference server (replica) of the run, each taking rollouts and getting each new policy version; a host name that resolves to several addresses (Compose's --scale vllm=3) is one replica per address; baseUrl alone when empty.",
    ),
  maxInFlightPerServer: z
    .number()
    .int()
    .min(1)
    .default(64)
    .describe('The most requests one rollout worker process sends one inference server at once; more wait in line.'),
  publishVia: z
    .enum(PUBLISH_VIAS)
    .default('shared-storage')
    .describe(
      "How inference servers get a new version's adapter: shared-storage (a control worker unpacks it into a folder every server sees at the same path) or replica-workers (a worker beside each server, started with --replica-url, fetches it from the trainer).",
    ),
  requestTimeoutSeconds: z.number().positive().default(60).describe('Seconds one chat completion may take before it is retried.'),
  probeTolerance: z
    .number()
    .positive()
    .default(0.05)
    .describe(
      "After each publish, every inference server's log-probs of a probe sequence must be within this mean |Δ| of the trainer's, or the publish fails; float32 engines agree to ~1e-5, bf16 GPUs need about 0.1.",
    ),
});

const RunConfigWithoutStepLimits = z
  .strictObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'letters, digits, . _ - (up to 63)')
      .default('sim-quickstart')
      .describe("The run's name: its run id is the name and the start time, and reports and the viewer show it."),
    env: EnvConfig.default({ kind: SIM_KIND }).describe(
      'The environment the agent acts in, chosen by env.kind; the SIMULATED sim world by default.',
    ),
    harnessPool: z
      .array(z.string().min(1).describe("A harness id of the env's pool."))
      .default([])
      .describe("Harness ids of the pool to use, base first; every harness the env's pool holds when empty."),
    policy: PolicyConfig.prefault({}).describe('The policy being trained: the endpoint rollouts sample from, its model and sampling.'),
    trainer: TrainerConfig.prefault({}).describe(
      "The Tinker-compatible trainer that trains the policy's LoRA, and its LoRA and Adam settings.",
    ),
    rollout: RolloutConfig.prefault({}).describe(
      'How each step samples: tasks per step (B), rollouts per task (G), turns and tokens per episode.',
    ),
    rescue: RescueConfig.prefault({}).describe('Rescue of dead groups by sibling harnesses (Harness-S).'),
    router: RouterConfig.prefault({}).describe(
      'How the siblings that rescue a dead group are picked, and the behaviour profiles they are picked by.',
    ),
    grpo: GrpoConfig.prefault({}).describe("How GRPO turns a group's rewards into advantages."),
    eval: EvalConfig.prefault({}).describe('Evaluation of the policy on a held-out split: base harness and Rank-1 routing.'),
    retry: RetryConfig.prefault({}).describe('How long an activity that calls an endpoint keeps trying.'),
    checkpoint: CheckpointConfig.prefault({}).describe(
      'Training-state checkpoints, which a run restores from and `harness-s run fork` branches from.',
    ),
    pipeline: PipelineConfig.prefault({}).describe(
      "Pipelined steps: the next step's rollouts overlap this step's training, within a staleness bound.",
    ),
    sampling: SamplingConfig.prefault({}).describe('How a step refills its batch beyond its first rollout.tasksPerStep tasks.'),
    budget: BudgetConfig.optional().describe(
      'A spend (rollouts or tokens, exactly one) at which the run stops training and evaluates as after its last step; none when absent (steps stays the cap).',
    ),
    health: HealthConfig.prefault({}).describe('When the run says it has stopped learning, and whether it then pauses.'),
    tracking: TrackingConfig.optional().describe('Experiment trackers the run is logged to; none when absent.'),
    steps: z.number().int().min(1).default(20).describe('Training steps of the run (a budget may stop it sooner).'),
    seed: z
      .number()
      .int()
      .min(0)
      .default(1)
      .describe(
        'Seed of task draws, probe draws, rollout sampling and random routing: runs with one seed draw the same tasks in the same order.',
      ),
  })
  .superRefine((config, ctx) => {
    const { groupSize } = config.rollout;
    const { k, enabled } = config.rescue;
    const { maxDraws } = config.sampling;
    if (maxDraws !== undefined && maxDraws < config.rollout.tasksPerStep) {
      ctx.addIssue({
        code: 'custom',
        path: ['sampling', 'maxDraws'],
        message: `counts the step's first rollout.tasksPerStep (${config.rollout.tasksPerStep}) tasks too: give at least that many`,
      });
    }
    if (config.router.strategy === 'vote' && config.router.voters.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['router', 'voters'],
        message: "the 'vote' strategy needs at least one voter {baseUrl, model}",
      });
    }
    if (enabled && config.router.strategy !== 'all' && groupSize % k !== 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['rescue', 'k'],
        message: `must divide rollout.groupSize (${groupSize}) so the rescued group keeps size G with G/k rollouts per harness`,
      });
    }
  });

/**
 * A run config a user gives: also no step larger than the largest tested
 * (STEP_LIMITS, core/rl/step-slices.ts). A config the store already holds
 * is read without these limits, so a run started before them still loads.
 */
export const RunConfig = RunConfigWithoutStepLimits.superRefine((config, ctx) => {
  const { tasksPerStep, groupSize } = config.rollout;
  const tested = `the largest step tested: ${STEP_LIMITS.tasksPerStep} tasks x G=8 on the sim, every Temporal history under its 10k-event warning`;
  if (tasksPerStep > STEP_LIMITS.tasksPerStep) {
    ctx.addIssue({ code: 'custom', path: ['rollout', 'tasksPerStep'], message: `at most ${STEP_LIMITS.tasksPerStep} (${tested})` });
  } else if (tasksPerStep * groupSize > STEP_LIMITS.rolloutsPerStep) {
    ctx.addIssue({
      code: 'custom',
      path: ['rollout', 'groupSize'],
      message: `${tasksPerStep} tasks x G=${groupSize} is ${tasksPerStep * groupSize} rollouts a step; at most ${STEP_LIMITS.rolloutsPerStep} (${tested})`,
    });
  }
  const { refill, maxDraws } = config.sampling;
  if (refill === 'none') return;
  // A refill draws fresh tasks in stream order across the whole step, so the step is played in one history.
  const draws = maxDraws ?? 3 * tasksPerStep;
  const which = maxDraws === undefined ? ` (3 x rollout.tasksPerStep when sampling.maxDraws is absent)` : '';
  const unsplit = `a step with refill '${refill}' is played in one history; the largest tested drew at most ${STEP_LIMITS.refillDraws} tasks`;
  if (draws > STEP_LIMITS.refillDraws) {
    ctx.addIssue({
      code: 'custom',
      path: ['sampling', 'maxDraws'],
      message: `draws up to ${draws} tasks${which}: at most ${STEP_LIMITS.refillDraws} (${unsplit}); give a smaller sampling.maxDraws or rollout.tasksPerStep`,
    });
  } else if (draws * groupSize > STEP_LIMITS.rolloutsPerStep) {
    ctx.addIssue({
      code: 'custom',
      path: ['sampling', 'maxDraws'],
      message: `up to ${draws} tasks${which} x G=${groupSize} is ${draws * groupSize} rollouts a step; at most ${STEP_LIMITS.rolloutsPerStep} (${tested})`,
    });
  }
});
export type RunConfig = z.infer<typeof RunConfig>;
/** What a user writes: every field with a default may be left out. */
export type RunConfigInput = z.input<typeof RunConfig>;

export class RunConfigError extends UserError {
  constructor(
    message: string,
    readonly paths: string[],
    /** Each bad field and what is wrong with it, as the message lists them. */
    readonly issues: ConfigIssue[] = [],
  ) {
    super(message);
    this.name = FAILURE_TYPES.RunConfigError;
  }
}

/**
 * Validates a run config a user wrote: every field is checked and every key
 * must be known, so a typo is refused instead of training with a default. The
 * error names each bad field by its path.
 */
export function parseRunConfig(raw: unknown, source = 'run config'): RunConfig {
  return parseConfigWith(RunConfig, raw, source);
}

function parseConfigWith(schema: typeof RunConfigWithoutStepLimits, raw: unknown, source: string): RunConfig {
  const { config, keyProblems } = takeLiteralKeys(raw);
  const parsed = schema.safeParse(config, { reportInput: true });
  if (parsed.success && keyProblems.length === 0) return parsed.data;
  const issues = [...keyProblems, ...(parsed.success ? [] : zodIssues(parsed.error, schema))];
  throw new RunConfigError(
    `${source} is invalid:\n${formatIssues(issues)}`,
    [...keyProblems.map((p) => p.path), ...(parsed.success ? [] : zodErrorPaths(parsed.error))],
    issues,
  );
}

/**
 * A config this project stored itself (runs.config, a continued execution's
 * input): written by an older version, it may hold keys this one no longer
 * has (such as the literal `apiKey` that configs held before keys moved to
 * `apiKeyEnv`); those are dropped rather than refused, so old runs still load.
 */
export function parseStoredRunConfig(raw: unknown, source: string): RunConfig {
  const cleaned = structuredClone(raw);
  for (const endpoint of endpointsOf(cleaned)) delete endpoint.value.apiKey;
  const first = RunConfigWithoutStepLimits.safeParse(cleaned);
  if (first.success) return first.data;
  for (const issue of first.error.issues) {
    if (issue.code !== 'unrecognized_keys') continue;
    const holder = valueAt(cleaned, issue.path);
    if (holder !== null && typeof holder === 'object') for (const key of issue.keys) delete (holder as Record<string, unknown>)[key];
  }
  return parseConfigWith(RunConfigWithoutStepLimits, cleaned, source);
}

/** The placeholder key OpenAI-compatible servers without auth accept ("EMPTY"), which older configs carried as a default. */
const NO_KEY = NO_API_KEY;

type KeyProblem = ConfigIssue;

/**
 * Literal API keys are refused: a config is stored in Temporal histories and
 * the run store. vLLM's "EMPTY" placeholder (the old default) is no secret and
 * is dropped.
 */
function takeLiteralKeys(raw: unknown): { config: unknown; keyProblems: KeyProblem[] } {
  const config = structuredClone(raw);
  const keyProblems: KeyProblem[] = [];
  for (const { path, value } of endpointsOf(config)) {
    if (!('apiKey' in value)) continue;
    if (value.apiKey !== NO_KEY && value.apiKey !== '') {
      keyProblems.push({
        path: `${path}.apiKey`,
        message:
          'a literal API key is not accepted: a run config is stored in Temporal histories and in the run store. ' +
          `Put the key in an environment variable of the workers and name it instead, e.g. "${path}": {"apiKeyEnv": "VLLM_API_KEY"}`,
      });
    }
    delete value.apiKey;
  }
  return { config, keyProblems };
}

/** The endpoint objects of a raw config that may carry a key: the policy, the trainer and each voter. */
function endpointsOf(config: unknown): Array<{ path: string; value: Record<string, unknown> }> {
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (!isObject(config)) return [];
  const found: Array<{ path: string; value: Record<string, unknown> }> = [];
  for (const name of ['policy', 'trainer']) if (isObject(config[name])) found.push({ path: name, value: config[name] });
  const voters = isObject(config.router) ? config.router.voters : undefined;
  if (Array.isArray(voters)) voters.forEach((v, i) => isObject(v) && found.push({ path: `router.voters.${i}`, value: v }));
  return found;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  return path.reduce<unknown>(
    (node, key) => (node !== null && typeof node === 'object' ? (node as Record<PropertyKey, unknown>)[key] : undefined),
    root,
  );
}

/** Every file or folder a config names, by its path in the config (the worker reads them); an evolution config has no trainer. */
export function filesNamedBy(
  config: Pick<RunConfig, 'env'> & { trainer?: Pick<RunConfig['trainer'], 'checkpointsDir'> },
): Array<{ path: string; file: string }> {
  const env = config.env;
  const named: Array<[string, string | undefined]> = [
    ...envFilesNamed(env).map(({ path, file }): [string, string] => [path, file]),
    ['env.harnessDir', env.harnessDir],
    ['env.pool', env.pool === undefined ? undefined : `${poolsDirSetting()}/${env.pool}`],
    ['trainer.checkpointsDir', config.trainer?.checkpointsDir],
  ];
  return named.flatMap(([path, file]) => (file === undefined ? [] : [{ path, file }]));
}

/**
 * A run stored before evaluation existed keeps what it began with, for good:
 * its stored config (complete, with defaults) has no `eval` section, and it
 * trains on every task (nothing held out) and never evaluates, also once it
 * continues as new or is recovered. The run workflow keeps the same rule for
 * its own replays with the `evaluate-policy` patch (workflows/run.ts).
 */
export function keepPreEvaluationShape(config: RunConfig, storedConfig: unknown): RunConfig {
  const beforeEvaluation = typeof storedConfig === 'object' && storedConfig !== null && !('eval' in storedConfig);
  return beforeEvaluation ? { ...config, eval: { ...config.eval, enabled: false, heldOut: 0 } } : config;
}

/** The JSON Schema of what a user may write (the input side: defaults are optional). */
export function runConfigJsonSchema(): unknown {
  return z.toJSONSchema(RunConfig, { io: 'input', unrepresentable: 'any' });
}

/**
 * The schema of a config file as the examples are written: `{"config": ...}`
 * (the workflow's input), with an optional `$schema` that points editors at
 * the JSON Schema and that harness-s ignores.
 */
export function configFileSchema(config: z.ZodType, what: { title: string; schemaFile: string; description: string }) {
  return z
    .strictObject({
      $schema: z
        .string()
        .optional()
        .describe(`The JSON Schema this file follows, for editors (${what.schemaFile} in examples/); harness-s ignores it.`),
      config: config.describe(what.description),
    })
    .meta({ title: what.title, description: `A ${what.title.toLowerCase()}: {"config": {...}}, the input of the workflow it starts.` });
}

/** The JSON Schema of a run config file (examples/run-config.schema.json): the wrapper, the config and every field's description. */
export function runConfigFileJsonSchema(): unknown {
  const file = configFileSchema(RunConfig, {
    title: 'Harness-S run config file',
    schemaFile: 'run-config.schema.json',
    description: 'The run config: every field may be left out for its default ({} runs the SIMULATED quick start).',
  });
  return z.toJSONSchema(file, { io: 'input', unrepresentable: 'any' });
}
