/**
 * How a run's steps are played (rollouts, rescue, sampling, GRPO, pipelining)
 * and how the run is looked after (evaluations, retries, checkpoints, budget,
 * health).
 */
import { z } from 'zod';
import { DEFAULT_ROLLOUTS_PER_SLICE } from './rl/step-slices';

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
    .number()
    .int()
    .min(1)
    .max(
      DEFAULT_ROLLOUTS_PER_SLICE,
      `at most ${DEFAULT_ROLLOUTS_PER_SLICE}: the slice size measured (a slice's result stays well under Temporal's 512 KB payload warning)`,
    )
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
