/** AppWorld's env config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, oneHarnessSource } from '../config-parts';
import { SandboxSizeConfig } from '../sandbox-config';

export const AppWorldEnvConfig = z
  .strictObject({
    kind: z.literal('appworld'),
    /** APPWORLD_ROOT, the folder holding AppWorld's data/ (the official data); the fixture world `harness-s appworld setup` builds when absent. */
    root: z.string().min(1).optional(),
    /** The dataset whose tasks the env offers: data/datasets/<name>.txt (official: train, dev, test_normal, test_challenge). */
    dataset: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/, 'a dataset name, e.g. train or fixture')
      .default('fixture'),
    /** AppWorld environment servers per worker, one per episode at once (each holds one world). */
    servers: z.number().int().positive().max(64).default(2),
    /** A folder of harness spec files (base + siblings); the shipped AppWorld pool when absent. */
    harnessDir: z.string().min(1).optional(),
    /** A frozen pool (by its hash) in place of the shipped or harnessDir pool. */
    pool: FrozenPoolHash,
    /** Each sandbox (an episode's server, an evaluator) in total: memory (MiB, default 4096) and processes (default 64). */
    sandbox: SandboxSizeConfig,
  })
  .superRefine(oneHarnessSource);
export type AppWorldEnvConfig = z.infer<typeof AppWorldEnvConfig>;
