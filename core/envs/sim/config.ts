/** The sim env's config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, HarnessDir, oneHarnessSource } from '../config-parts';
import { SIM_KIND } from '../../sim-kind';

export const SimEnvConfig = z
  .strictObject({
    kind: z.literal(SIM_KIND).describe("sim: the SIMULATED world, acted in by the sim cluster's SIMULATED policy."),
    world: z
      .string()
      .min(1)
      .optional()
      .describe(
        'SIMULATED: a sim world file (task kinds, behaviours, harnesses; see core/envs/sim/world.json); the shipped world when absent.',
      ),
    harnessDir: HarnessDir.describe(
      "SIMULATED: a folder of SimHarness JSON files that replace the world's harnesses (checked against its behaviours); not with pool.",
    ),
    pool: FrozenPoolHash,
  })
  .superRefine(oneHarnessSource)
  .describe('The SIMULATED sim env: tasks succeed when the agent performs the behaviours their kind requires, then finishes.');
export type SimEnvConfig = z.infer<typeof SimEnvConfig>;
