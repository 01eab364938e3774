/**
 * Pieces every env config shares: where its harnesses come from when not
 * the env's shipped pool. Workflow code bundles the env configs, so this
 * module, like them, imports nothing that reaches outside.
 */
import { z } from 'zod';

/** A frozen pool by its hash: the env's harnesses come from `<poolsRoot>/<hash>/`, verified against the hash. */
export const FrozenPoolHash = z
  .string()
  .regex(
    /^[0-9a-f]{16}$/,
    "a frozen pool's hash: 16 lower-case hex characters, as printed by `harness-s pool evolve` or `harness-s pool list`",
  )
  .optional()
  .describe(
    "A frozen pool by its hash (as `harness-s pool list` prints it), read from $HARNESS_S_POOLS_DIR/<hash>/ and checked against the hash, in place of the env's shipped pool; not with harnessDir.",
  );

/** A folder of harness files in place of the env's shipped pool. */
export const HarnessDir = z
  .string()
  .min(1)
  .optional()
  .describe("A folder of harness spec files (the base and its siblings) in place of the env's shipped pool; not with pool.");

/** A pool comes from one place: a frozen pool or a folder of specs, not both. */
export function oneHarnessSource(env: { pool?: string; harnessDir?: string }, ctx: z.RefinementCtx): void {
  if (env.pool !== undefined && env.harnessDir !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['pool'],
      message: 'name either a frozen pool (pool) or a folder of harness files (harnessDir), not both',
    });
  }
}
