/**
 * RunConfig: the single JSON object a Harness-S run starts from.
 *
 * It is validated at every boundary it crosses (CLI, workflow input); inside,
 * code trusts the type. Defaults make the embedded sim cluster the default.
 */
import { z } from 'zod';
import { formatZodError, zodErrorPaths } from './zod-errors';
import { UserError } from './errors';
import { NO_API_KEY } from './secrets';
import { FAILURE_TYPES } from './failure-types';
import { EnvConfig, envFilesNamed } from './envs/env-configs';
import { SIM_KIND } from './sim-kind';
import { TrackingConfig } from './tracking/tracker-configs';
import { DEFAULT_ROLLOUTS_PER_SLICE, STEP_LIMITS } from './rl/step-slices';
import { PUBLISH_VIAS } from './policy/replicas';

export const SIM_CLUSTER_URL = 'http://127.0.0.1:8765';

/**
 * Where an endpoint's API key comes from: the name of an environment variable
 * of the worker processes, read where the call is made (core/secrets.ts). A
 * config never holds the key itself: configs are stored in every Temporal
 * history and in the run store. No key is sent when absent.
 */
export const ApiKeyEnv = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'the name of an environment variable of the workers, such as VLLM_API_KEY')
  .optional();

export const Url = z.url({ protocol: /^https?$/, message: 'must be an absolute http(s) URL such as http://127.0.0.1:8000' });

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
  /** OpenAI-compatible endpoint (vLLM, or the sim cluster), ending in /v1: the run's one replica when inferenceServers is empty. */
  baseUrl: Url.default(`${SIM_CLUSTER_URL}/v1`),
  /** The base model id the endpoint serves; step 0 rolls out with it. */
  model: z.string().min(1).default('sim-policy-base'),
  apiKeyEnv: ApiKeyEnv,
  temperature: z.number().min(0).max(2).default(1),
  /**
   * Every inference server (replica) of the run: each takes rollouts (balanced by requests in flight, an
   * episode's turns on one replica) and gets each new policy version. baseUrl alone when empty. A URL whose
   * host name resolves to several addresses (Compose's `--scale vllm=3`) is one replica per address.
   */
  inferenceServers: z.array(Url).default([]),
  /** The most requests one rollout worker process sends one replica at once; more wait in line. */
  maxInFlightPerServer: z.number().int().min(1).default(64),
  /**
   * How replicas get a new version's adapter: `shared-storage` (a control worker unpacks it into its adapter
   * folder, which every replica sees at the same path), or `replica-workers` (a worker beside each replica,
   * started with --replica-url, fetches it from the trainer into its own folder: nothing shared).
   */
  publishVia: z.enum(PUBLISH_VIAS).default('shared-storage'),
  /** Seconds one chat completion may take before it is retried. */
  requestTimeoutSeconds: z.number().positive().default(60),
  /**
   * After a policy version is published, each inference server's log-probs of a probe sequence must be
   * within this mean |Δ| of the trainer's, or the publish fails (a stale adapter is never served silently).
   * float32 engines agree to ~1e-5; bf16 GPUs need more room (0.1).
   */
  probeTolerance: z.number().positive().default(0.05),
});

export const AdamParams = z.strictObject({
  learningRate: z.number().positive().default(0.05),
  beta1: z.number().min(0).max(1).default(0.9),
  beta2: z.number().min(0).max(1).default(0.999),
  eps: z.number().positive().default(1e-8),
  /** Decoupled weight decay (AdamW). */
  weightDecay: z.number().min(0).default(0),
  /** Clip the global gradient norm to this (0: no clipping). */
  gradClipNorm: z.number().min(0).default(0),
});

/** Which layers get LoRA adapters (Tinker's lora_config). */
export const LoraTargets = z.strictObject({
  trainAttn: z.boolean().default(true),
  trainMlp: z.boolean().default(true),
  trainUnembed: z.boolean().default(false),
  /** Seed of the adapters' initialisation; the trainer picks one when absent. */
  seed: z.number().int().min(0).optional(),
});

export const TrainerConfig = z.strictObject({
  /** A Tinker-compatible REST service (SkyRL's Tinker server, verl behind one, the sim cluster). */
  baseUrl: Url.default(SIM_CLUSTER_URL),
  apiKeyEnv: ApiKeyEnv,
  loraRank: z.number().int().positive().default(32),
  lora: LoraTargets.prefault({}),
  adam: AdamParams.prefault({}),
  /** Seconds between retrieve_future polls. */
  pollSeconds: z.number().positive().default(0.2),
  /**
   * The trainer's checkpoints folder as the worker sees it (SkyRL's --checkpoints-base), to unpack sampler
   * weights from; without it they are downloaded through the Tinker API's checkpoint archive.
   */
  checkpointsDir: z.string().min(1).optional(),
});

export const RolloutConfig = z.strictObject({
  /** B: tasks sampled per step. */
  tasksPerStep: z.number().int().min(1).default(16),
  /** G: rollouts per task group. */
  groupSize: z.number().int().min(2, 'GRPO compares rollouts within a group: use at least 2').default(8),
  maxTurns: z.number().int().min(1).default(5),
  /** Tokens the policy may generate per assistant turn (max_tokens); the server's limit when absent. */
  maxTokens: z.number().int().min(1).optional(),
  /** Rollouts run at once inside one group activity. */
  concurrency: z.number().int().min(1).default(8),
  /**
   * A step with more base rollouts than this plays its tasks in slices of rolloutsPerSlice / groupSize
   * tasks (at most 256), each a child workflow, so every history stays short. The default is the
   * size measured; lower it only to see a small step split.
   */
  rolloutsPerSlice: z
    .number().int().min(1)
    .max(DEFAULT_ROLLOUTS_PER_SLICE, `at most ${DEFAULT_ROLLOUTS_PER_SLICE}: the slice size measured (a slice's result stays well under Temporal's 512 KB payload warning)`)
    .default(DEFAULT_ROLLOUTS_PER_SLICE),
});

export const RescueConfig = z.strictObject({
  enabled: z.boolean().default(true),
  /** k: sibling harnesses per rescued group (each runs G/k rollouts). */
  k: z.number().int().min(1).default(2),
});

/**
 * How a step fills its batch beyond the first `rollout.tasksPerStep` tasks of
 * its task stream (core/rl/task-sampling.ts: every arm of a seed draws the
 * same tasks in the same order, so an extra task is the stream's next one).
 * - `none`: the first tasksPerStep tasks, no more.
 * - `dynamic` (dynamic sampling, as DAPO): a group whose rollouts all got the
 *   same reward (after rescue, when rescue is on) is dropped and a fresh task's
 *   group drawn in its place, until the step has tasksPerStep groups with
 *   signal or has drawn `maxDraws` tasks.
 * - `matched`: each dead base group (no rollout succeeded) draws one fresh task
 *   and keeps both groups: a dead group costs G more rollouts, as under rescue,
 *   spent on a new task instead of on siblings (the `policy-only-matched` arm).
 */
export const SAMPLING_REFILLS = ['none', 'dynamic', 'matched'] as const;
export const SamplingConfig = z.strictObject({
  refill: z.enum(SAMPLING_REFILLS).default('none'),
  /** The most tasks a step draws in all, its first tasksPerStep included; 3 x tasksPerStep when absent (and never more than the training split). */
  maxDraws: z.number().int().min(1).optional(),
});
export type SamplingConfig = z.infer<typeof SamplingConfig>;

/**
 * A spend at which the run stops training and evaluates, like at its last
 * step: the first step whose running total reaches it is the last (`steps`
 * stays the cap). Rollouts count every rollout a training step ran (base,
 * rescue, refills); tokens count the policy's prompt and completion tokens of
 * those rollouts, as the inference server processed them.
 */
export const BudgetConfig = z
  .strictObject({
    rollouts: z.number().int().min(1).optional(),
    tokens: z.number().int().min(1).optional(),
  })
  .refine((b) => (b.rollouts === undefined) !== (b.tokens === undefined), { message: 'give exactly one of rollouts or tokens' });
export type BudgetConfig = z.infer<typeof BudgetConfig>;

/**
 * When a run says it stopped learning (core/rl/run-health.ts): too few groups
 * with signal for a while, or no gain in base success over recent
 * evaluations. The run's status, its current details in the Web UI and the
 * harness_s_run_stalled metric show it; with `pause`, the run pauses with the reason.
 */
export const HealthConfig = z.strictObject({
  /** Stalled when the share of groups with a non-zero advantage stays below this for `steps` steps in a row (0: never). */
  minLiveShare: z.number().min(0).max(1).default(0.1),
  steps: z.number().int().min(1).default(5),
  /** Stalled when base success on the eval split has not risen by `minGain` over the last `evaluations` evaluations (0: never). */
  evaluations: z.number().int().min(0).default(3),
  minGain: z.number().min(0).max(1).default(0),
  /** Pause the run when it is stalled (a resume clears it until the rule trips again). */
  pause: z.boolean().default(false),
});
export type HealthConfig = z.infer<typeof HealthConfig>;

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

export const EvalConfig = z.strictObject({
  /** Run evaluatePolicy at all (every `every` steps and at the end). */
  enabled: z.boolean().default(true),
  /** Fraction of each task kind held out of training and probing: the eval split (0: evaluate on training tasks). */
  heldOut: z.number().min(0).max(0.9).default(0.2),
  /** Evaluate every N steps (0: only at the end); always at the end. */
  every: z.number().int().min(0).default(10),
  /** Eval tasks per kind, a fixed draw from the split (fewer when the split is smaller). */
  tasksPerKind: z.number().int().min(1).default(8),
  /** Executor rollouts per task, the same for the base harness and for Rank-1 routing. */
  rollouts: z.number().int().min(1).default(4),
});

/**
 * How long an activity that calls an endpoint keeps trying (exponential
 * backoff from 1 s). Past its last attempt, a group whose task keeps failing
 * is recorded as failed and the step goes on; an endpoint that keeps failing
 * (the policy's, the trainer's, an inference server's) pauses the run with the
 * reason, to be resumed once it is back.
 */
export const RetryConfig = z.strictObject({
  maxAttempts: z.number().int().min(1).default(10),
  /** The longest wait between two attempts. */
  maxIntervalSeconds: z.number().positive().default(30),
});
export type RetryConfig = z.infer<typeof RetryConfig>;

/**
 * Training-state checkpoints (weights and optimizer state, the Tinker API's
 * save_weights), from which a run restores when its trainer loses its model,
 * and from which `harness-s run fork` branches a run.
 */
export const CheckpointConfig = z.strictObject({
  /** Save the training state after every N-th step (steps N-1, 2N-1, ...) and after the last step; 0: after the last step only. */
  every: z.number().int().min(0).default(5),
  /** Checkpoints kept per run; older ones are deleted on the trainer. */
  keep: z.number().int().min(1).default(3),
  /**
   * When the trainer loses the model before the run has a checkpoint: `restart` starts the model over from
   * the base (steps re-run from 0), `pause` pauses the run with the reason (a resume then restarts it).
   */
  onLoss: z.enum(['restart', 'pause']).default('restart'),
});
export type CheckpointConfig = z.infer<typeof CheckpointConfig>;

/**
 * Pipelined steps: step n+1's rollouts overlap step n's training and
 * publishing, on the newest policy version published, with a bound on how
 * stale a sample may be when it is trained (docs/pipelining.md).
 */
export const PipelineConfig = z.strictObject({
  /**
   * k: how many policy versions the trainer may be ahead of the version that sampled a trajectory when it
   * trains on it. 0: no overlap (each step samples the policy the previous step published).
   */
  maxStaleness: z.number().int().min(0).max(4).default(0),
  /**
   * A step whose newest published version would be more than k versions behind when it trains: `wait`
   * holds its rollouts until a fresh enough version is published (the only mode; a sample never goes past the bound).
   */
  whenStale: z.enum(['wait']).default('wait'),
});
export type PipelineConfig = z.infer<typeof PipelineConfig>;

export const GrpoConfig = z.strictObject({
  /** false: Dr.GRPO (no division by the group's std). */
  normalizeByStd: z.boolean().default(true),
});

const RunConfigWithoutStepLimits = z
  .strictObject({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'letters, digits, . _ - (up to 63)').default('sim-quickstart'),
    env: EnvConfig.default({ kind: SIM_KIND }),
    /** Harness ids of the pool to use, base first; every harness the env defines when empty. */
    harnessPool: z.array(z.string().min(1)).default([]),
    policy: PolicyConfig.prefault({}),
    trainer: TrainerConfig.prefault({}),
    rollout: RolloutConfig.prefault({}),
    rescue: RescueConfig.prefault({}),
    router: RouterConfig.prefault({}),
    grpo: GrpoConfig.prefault({}),
    eval: EvalConfig.prefault({}),
    retry: RetryConfig.prefault({}),
    checkpoint: CheckpointConfig.prefault({}),
    pipeline: PipelineConfig.prefault({}),
    sampling: SamplingConfig.prefault({}),
    budget: BudgetConfig.optional(),
    health: HealthConfig.prefault({}),
    /** Experiment trackers the run is logged to (core/tracking/): none when absent. */
    tracking: TrackingConfig.optional(),
    steps: z.number().int().min(1).default(20),
    seed: z.number().int().min(0).default(1),
  })
  .superRefine((config, ctx) => {
    const { groupSize } = config.rollout;
    const { k, enabled } = config.rescue;
    const { maxDraws } = config.sampling;
    if (maxDraws !== undefined && maxDraws < config.rollout.tasksPerStep) {
      ctx.addIssue({ code: 'custom', path: ['sampling', 'maxDraws'], message: `counts the step's first rollout.tasksPerStep (${config.rollout.tasksPerStep}) tasks too: give at least that many` });
    }
    if (config.router.strategy === 'vote' && config.router.voters.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['router', 'voters'], message: "the 'vote' strategy needs at least one voter {baseUrl, model}" });
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
      code: 'custom', path: ['rollout', 'groupSize'],
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
    ctx.addIssue({ code: 'custom', path: ['sampling', 'maxDraws'], message: `draws up to ${draws} tasks${which}: at most ${STEP_LIMITS.refillDraws} (${unsplit}); give a smaller sampling.maxDraws or rollout.tasksPerStep` });
  } else if (draws * groupSize > STEP_LIMITS.rolloutsPerStep) {
    ctx.addIssue({
      code: 'custom', path: ['sampling', 'maxDraws'],
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
  const parsed = schema.safeParse(config);
  if (parsed.success && keyProblems.length === 0) return parsed.data;
  const lines = [...keyProblems.map((p) => `  - ${p.path}: ${p.message}`), ...(parsed.success ? [] : [formatZodError(parsed.error, schema)])];
  throw new RunConfigError(`${source} is invalid:\n${lines.join('\n')}`, [
    ...keyProblems.map((p) => p.path),
    ...(parsed.success ? [] : zodErrorPaths(parsed.error)),
  ]);
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

interface KeyProblem {
  path: string;
  message: string;
}

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
  return path.reduce<unknown>((node, key) => (node !== null && typeof node === 'object' ? (node as Record<PropertyKey, unknown>)[key] : undefined), root);
}

/** Every file or folder a config names, by its path in the config (the worker reads them); an evolution config has no trainer. */
export function filesNamedBy(config: Pick<RunConfig, 'env'> & { trainer?: Pick<RunConfig['trainer'], 'checkpointsDir'> }): Array<{ path: string; file: string }> {
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
