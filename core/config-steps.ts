/**
 * How a run's steps are played (rollouts, rescue, sampling, GRPO, pipelining)
 * and how the run is looked after (evaluations, retries, checkpoints, budget,
 * health).
 */
import { z } from 'zod';
import { DEFAULT_ROLLOUTS_PER_SLICE } from './rl/step-slices';

export const RolloutConfig = z.strictObject({
  tasksPerStep: z.number().int().min(1).default(16).describe('B: training tasks drawn per step, each played as a group of G rollouts.'),
  groupSize: z
    .number()
    .int()
    .min(2, 'GRPO compares rollouts within a group: use at least 2')
    .default(8)
    .describe("G: rollouts per task group, whose rewards GRPO compares to make each rollout's advantage."),
  maxTurns: z
    .number()
    .int()
    .min(1)
    .default(5)
    .describe('The most policy turns one episode may take; past it the episode ends as turn_limit.'),
  maxTokens: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe("Tokens the policy may generate per assistant turn (max_tokens); the inference server's limit when absent."),
  concurrency: z.number().int().min(1).default(8).describe('Rollouts run at once inside one group activity.'),
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
    .default(DEFAULT_ROLLOUTS_PER_SLICE)
    .describe(
      'A step with more base rollouts than this is played in slices of rolloutsPerSlice / groupSize tasks, each a child workflow, so every Temporal history stays short; lower it only to see a small step split.',
    ),
});

export const RescueConfig = z.strictObject({
  enabled: z
    .boolean()
    .default(true)
    .describe('Rescue dead groups (no base rollout succeeded) with sibling harnesses; false: the policy-only baseline.'),
  k: z
    .number()
    .int()
    .min(1)
    .default(2)
    .describe('k: sibling harnesses per rescued group, each running G/k rollouts (k must divide rollout.groupSize).'),
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
  refill: z
    .enum(SAMPLING_REFILLS)
    .default('none')
    .describe(
      "How a step fills its batch beyond its first tasksPerStep tasks: none; dynamic (a group whose rollouts all got the same reward is replaced by a fresh task's group, as DAPO); matched (each dead base group draws one fresh task and keeps both).",
    ),
  maxDraws: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe(
      'The most tasks a step draws in all, its first tasksPerStep included, when refill is on; 3 x rollout.tasksPerStep when absent (never more than the training split).',
    ),
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
    rollouts: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        'Stop training, and evaluate, after the first step whose running total of training rollouts (base, rescue, refills) reaches this.',
      ),
    tokens: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        "Stop training, and evaluate, after the first step whose running total of the policy's prompt and completion tokens in training rollouts reaches this.",
      ),
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
  minLiveShare: z
    .number()
    .min(0)
    .max(1)
    .default(0.1)
    .describe(
      'Stalled when the share of groups with a non-zero advantage stays below this in each of the last health.steps steps; 0: never.',
    ),
  steps: z.number().int().min(1).default(5).describe('How many steps in a row the live share must stay below minLiveShare to stall.'),
  evaluations: z
    .number()
    .int()
    .min(0)
    .default(3)
    .describe(
      'Stalled when base success on the eval split has risen by no more than minGain over the last this many evaluations; 0: never.',
    ),
  minGain: z
    .number()
    .min(0)
    .max(1)
    .default(0)
    .describe('The rise in base success (a fraction, 0 to 1) over health.evaluations evaluations that counts as learning.'),
  pause: z
    .boolean()
    .default(false)
    .describe('Pause the run when it is stalled (a resume clears it until the rule trips again); false: only report it.'),
});
export type HealthConfig = z.infer<typeof HealthConfig>;

export const EvalConfig = z.strictObject({
  enabled: z.boolean().default(true).describe('Evaluate the policy at all (every eval.every steps and after the last step).'),
  heldOut: z
    .number()
    .min(0)
    .max(0.9)
    .default(0.2)
    .describe('Fraction of each task kind held out of training and probing as the eval split; 0: evaluate on the training tasks.'),
  every: z
    .number()
    .int()
    .min(0)
    .default(10)
    .describe('Evaluate every this many steps, and always after the last step; 0: only after the last.'),
  tasksPerKind: z
    .number()
    .int()
    .min(1)
    .default(8)
    .describe('Eval tasks per task kind, a fixed draw from the eval split (fewer when the split is smaller).'),
  rollouts: z.number().int().min(1).default(4).describe('Rollouts per eval task, the same for the base harness and for Rank-1 routing.'),
});

/**
 * How long an activity that calls an endpoint keeps trying (exponential
 * backoff from 1 s). Past its last attempt, a group whose task keeps failing
 * is recorded as failed and the step goes on; an endpoint that keeps failing
 * (the policy's, the trainer's, an inference server's) pauses the run with the
 * reason, to be resumed once it is back.
 */
export const RetryConfig = z.strictObject({
  maxAttempts: z
    .number()
    .int()
    .min(1)
    .default(10)
    .describe(
      "Attempts of an activity that calls an endpoint (exponential backoff from 1 s); past the last, the group's task is recorded as failed, or the run pauses when the endpoint keeps failing.",
    ),
  maxIntervalSeconds: z.number().positive().default(30).describe('The longest wait between two attempts, in seconds.'),
});
export type RetryConfig = z.infer<typeof RetryConfig>;

/**
 * Training-state checkpoints (weights and optimizer state, the Tinker API's
 * save_weights), from which a run restores when its trainer loses its model,
 * and from which `harness-s run fork` branches a run.
 */
export const CheckpointConfig = z.strictObject({
  every: z
    .number()
    .int()
    .min(0)
    .default(5)
    .describe('Save the training state after every N-th step (steps N-1, 2N-1, ...) and after the last step; 0: after the last step only.'),
  keep: z.number().int().min(1).default(3).describe('Checkpoints kept per run; older ones are deleted on the trainer.'),
  onLoss: z
    .enum(['restart', 'pause'])
    .default('restart')
    .describe(
      'When the trainer loses the model before the run has a checkpoint: restart starts the model over from the base (steps re-run from 0), pause pauses the run with the reason.',
    ),
});
export type CheckpointConfig = z.infer<typeof CheckpointConfig>;

/**
 * Pipelined steps: step n+1's rollouts overlap step n's training and
 * publishing, on the newest policy version published, with a bound on how
 * stale a sample may be when it is trained (docs/pipelining.md).
 */
export const PipelineConfig = z.strictObject({
  maxStaleness: z
    .number()
    .int()
    .min(0)
    .max(4)
    .default(0)
    .describe(
      "How many policy versions the trainer may be ahead of the version that sampled a trajectory when it trains on it; 0: no overlap, each step samples the previous step's policy.",
    ),
  whenStale: z
    .enum(['wait'])
    .default('wait')
    .describe(
      'What a step does whose newest published version would be more than maxStaleness versions behind: wait holds its rollouts until a fresh enough version is published (the only mode).',
    ),
});
export type PipelineConfig = z.infer<typeof PipelineConfig>;

export const GrpoConfig = z.strictObject({
  normalizeByStd: z
    .boolean()
    .default(true)
    .describe("Divide each group's advantages by the group's reward standard deviation; false: Dr.GRPO (no division)."),
});
