/** The charset env's config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, oneHarnessSource } from '../config-parts';

export const CharsetEnvConfig = z
  .strictObject({
    kind: z.literal('charset'),
    /** A charset task file (see core/envs/charset/tasks.json); the shipped digits tasks when absent. */
    tasks: z.string().min(1).optional(),
    /** A folder of harness spec files (base + siblings); the shipped charset pool when absent. */
    harnessDir: z.string().min(1).optional(),
    /** A frozen pool (by its hash) in place of the shipped or harnessDir pool. */
    pool: FrozenPoolHash,
  })
  .superRefine(oneHarnessSource);
export type CharsetEnvConfig = z.infer<typeof CharsetEnvConfig>;
