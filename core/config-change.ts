/**
 * Safe config changes to a running run (the `updateConfig` workflow update):
 * only settings that neither change what has been measured nor how the next
 * steps are sampled or trained may move. Pure: the workflow validates with it.
 */
import { z } from 'zod';
import { RunConfig, RunConfigError } from './config';
import { formatZodError } from './validation';

export const SAFE_CONFIG_FIELDS = [
  'steps',
  'rollout.concurrency',
  'router.reanchorEvery',
  'eval.enabled',
  'eval.every',
  'policy.requestTimeoutSeconds',
  'trainer.pollSeconds',
] as const;

const notChangeable = (issue: { code: string; keys?: string[] }) =>
  issue.code === 'unrecognized_keys'
    ? `cannot change during a run: ${issue.keys?.join(', ')} (safe to change: ${SAFE_CONFIG_FIELDS.join(', ')})`
    : undefined;

const section = <T extends z.ZodRawShape>(shape: T) => z.strictObject(shape, { error: notChangeable }).optional();

/** What an `updateConfig` may carry: a partial config of the safe fields only. */
export const RunConfigChange = z.strictObject(
  {
    steps: RunConfig.shape.steps.unwrap().optional(),
    rollout: section({ concurrency: z.number().int().min(1).optional() }),
    router: section({ reanchorEvery: z.number().int().min(0).optional() }),
    eval: section({ enabled: z.boolean().optional(), every: z.number().int().min(0).optional() }),
    policy: section({ requestTimeoutSeconds: z.number().positive().optional() }),
    trainer: section({ pollSeconds: z.number().positive().optional() }),
  },
  { error: notChangeable },
);
export type RunConfigChange = z.infer<typeof RunConfigChange>;

/**
 * The config after a change, validated whole. `stepsDone` steps have run: the
 * run cannot end before the step it is on.
 */
export function applyConfigChange(config: RunConfig, raw: unknown, stepsDone: number): RunConfig {
  const parsed = RunConfigChange.safeParse(raw);
  if (!parsed.success) throw new RunConfigError(`config change is invalid:\n${formatZodError(parsed.error)}`, parsed.error.issues.map((i) => i.path.join('.')));
  const change = parsed.data;
  if (change.steps !== undefined && change.steps < stepsDone + 1) {
    throw new RunConfigError(`config change is invalid:\n  - steps: ${stepsDone} steps have run; give at least ${stepsDone + 1}`, ['steps']);
  }
  const next = {
    ...config,
    steps: change.steps ?? config.steps,
    rollout: { ...config.rollout, ...change.rollout },
    router: { ...config.router, ...change.router },
    eval: { ...config.eval, ...change.eval },
    policy: { ...config.policy, ...change.policy },
    trainer: { ...config.trainer, ...change.trainer },
  };
  const checked = RunConfig.safeParse(next);
  if (!checked.success) throw new RunConfigError(`config change is invalid:\n${formatZodError(checked.error)}`, checked.error.issues.map((i) => i.path.join('.')));
  return checked.data;
}
