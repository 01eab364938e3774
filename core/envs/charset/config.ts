/** The charset env's config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, HarnessDir, oneHarnessSource } from '../config-parts';

export const CharsetEnvConfig = z
  .strictObject({
    kind: z.literal('charset').describe('charset: one-turn replies scored by the share of their characters in a character set.'),
    tasks: z
      .string()
      .min(1)
      .optional()
      .describe('A charset task file (see core/envs/charset/tasks.json); the shipped digits tasks when absent.'),
    harnessDir: HarnessDir,
    pool: FrozenPoolHash,
  })
  .superRefine(oneHarnessSource)
  .describe(
    "The charset env: a toy task a tiny random-init model learns from reward alone (a reply succeeds when enough of its characters are in the task's set), for the real CPU stack.",
  );
export type CharsetEnvConfig = z.infer<typeof CharsetEnvConfig>;
