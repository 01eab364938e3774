/** The sim env's config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, oneHarnessSource } from '../config-parts';
import { SIM_KIND } from '../../sim-kind';

export const SimEnvConfig = z
  .strictObject({
    kind: z.literal(SIM_KIND),
    /** A world file (see core/envs/sim/world.json); the shipped world when absent. */
    world: z.string().min(1).optional(),
    /** A folder of SimHarness JSON files that replace the world's harnesses (checked against its behaviours). */
    harnessDir: z.string().min(1).optional(),
    /** A frozen pool (by its hash) in place of the shipped or harnessDir pool. */
    pool: FrozenPoolHash,
  })
  .superRefine(oneHarnessSource);
export type SimEnvConfig = z.infer<typeof SimEnvConfig>;
