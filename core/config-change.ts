/**
 * Safe config changes to a running run (the `updateConfig` workflow update):
 * only settings that change neither how steps are sampled nor how they are
 * trained and routed may move. Pure and deterministic: the workflow applies
 * changes with it, so a change merges the named fields only and never fills
 * in defaults (a replay must rebuild the same config).
 */
import { z } from 'zod';
import { BudgetConfig, HealthConfig, RunConfigError, type RunConfig } from './config';

const HEALTH_DEFAULTS = HealthConfig.parse({});
import { formatZodError } from './zod-errors';

export const SAFE_CONFIG_FIELDS = [
  'steps',
  'rollout.concurrency',
  'eval.enabled',
  'eval.every',
  'policy.requestTimeoutSeconds',
  'trainer.pollSeconds',
  'checkpoint.every',
  'checkpoint.keep',
  'checkpoint.onLoss',
  'pipeline.maxStaleness',
  'budget',
  'health.minLiveShare',
  'health.steps',
  'health.evaluations',
  'health.minGain',
  'health.pause',
] as const;

const notChangeable = (issue: { code: string; keys?: string[] }) =>
  issue.code === 'unrecognized_keys'
    ? `cannot change during a run: ${issue.keys?.join(', ')} (safe to change: ${SAFE_CONFIG_FIELDS.join(', ')})`
    : undefined;

const section = <T extends z.ZodRawShape>(shape: T) => z.strictObject(shape, { error: notChangeable }).optional();

/** What an `updateConfig` may carry: a partial config of the safe fields only. */
export const RunConfigChange = z.strictObject(
  {
    steps: z.number().int().min(1).optional(),
    rollout: section({ concurrency: z.number().int().min(1).optional() }),
    eval: section({ enabled: z.boolean().optional(), every: z.number().int().min(0).optional() }),
    policy: section({ requestTimeoutSeconds: z.number().positive().optional() }),
    trainer: section({ pollSeconds: z.number().positive().optional() }),
    checkpoint: section({
      every: z.number().int().min(0).optional(),
      keep: z.number().int().min(1).optional(),
      onLoss: z.enum(['restart', 'pause']).optional(),
    }),
    pipeline: section({ maxStaleness: z.number().int().min(0).max(4).optional() }),
    /** A new budget replaces the run's (or gives it one): the run stops at the first step that reaches it. */
    budget: BudgetConfig.optional(),
    health: section({
      minLiveShare: z.number().min(0).max(1).optional(),
      steps: z.number().int().min(1).optional(),
      evaluations: z.number().int().min(0).optional(),
      minGain: z.number().min(0).max(1).optional(),
      pause: z.boolean().optional(),
    }),
  },
  { error: notChangeable },
);
export type RunConfigChange = z.infer<typeof RunConfigChange>;

/** Checks a change on its own: its shape and values. */
export function parseConfigChange(raw: unknown): RunConfigChange {
  const parsed = RunConfigChange.safeParse(raw);
  if (!parsed.success) {
    throw new RunConfigError(
      `config change is invalid:\n${formatZodError(parsed.error)}`,
      parsed.error.issues.map((i) => i.path.join('.')),
    );
  }
  return parsed.data;
}

/**
 * The config after a change. `minSteps`: the steps done, plus the one in
 * flight; the run cannot end before them.
 */
export function applyConfigChange(config: RunConfig, raw: unknown, minSteps: number): RunConfig {
  const change = parseConfigChange(raw);
  if (change.steps !== undefined && change.steps < minSteps) {
    throw new RunConfigError(`config change is invalid:\n  - steps: ${minSteps} steps have run or are running; give at least ${minSteps}`, [
      'steps',
    ]);
  }
  // Only the sections the change names are rebuilt: a section the config lacks (a run older than
  // it) stays absent, and nothing is filled in from defaults.
  return {
    ...config,
    steps: change.steps ?? config.steps,
    ...(change.rollout && { rollout: { ...config.rollout, ...change.rollout } }),
    ...(change.eval && { eval: { ...config.eval, ...change.eval } }),
    ...(change.policy && { policy: { ...config.policy, ...change.policy } }),
    ...(change.trainer && { trainer: { ...config.trainer, ...change.trainer } }),
    ...(change.checkpoint && { checkpoint: { ...config.checkpoint, ...change.checkpoint } }),
    // A run from before pipelining has no section: the change adds it whole.
    ...(change.pipeline && {
      pipeline: {
        ...((config.pipeline as RunConfig['pipeline'] | undefined) ?? { maxStaleness: 0, whenStale: 'wait' as const }),
        ...change.pipeline,
      },
    }),
    ...(change.budget && { budget: change.budget }),
    // A run from before the health rule has no section: the change adds it with the rule's defaults.
    ...(change.health && { health: { ...((config.health as RunConfig['health'] | undefined) ?? HEALTH_DEFAULTS), ...change.health } }),
  };
}
