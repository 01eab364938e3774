/** AppWorld's env config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, HarnessDir, oneHarnessSource } from '../config-parts';
import { SandboxSizeConfig } from '../sandbox-config';

export const AppWorldEnvConfig = z
  .strictObject({
    kind: z.literal('appworld').describe("appworld: AppWorld, tasks done by Python against the apps' APIs."),
    root: z
      .string()
      .min(1)
      .optional()
      .describe(
        "APPWORLD_ROOT, the folder holding AppWorld's data/ (the official data), as the workers see it; the fixture world `harness-s appworld setup` builds when absent.",
      ),
    dataset: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/, 'a dataset name, e.g. train or fixture')
      .default('fixture')
      .describe(
        'The dataset whose tasks the env offers, data/datasets/<name>.txt under root (official: train, dev, test_normal, test_challenge).',
      ),
    servers: z
      .number()
      .int()
      .positive()
      .max(64)
      .default(2)
      .describe('AppWorld environment servers each worker starts, one per episode at once (each holds one world).'),
    harnessDir: HarnessDir,
    pool: FrozenPoolHash,
    sandbox: SandboxSizeConfig.describe(
      "Each sandbox (an episode's server, an evaluator) in total: memory (MiB, default 4096) and processes (default 64).",
    ),
  })
  .superRefine(oneHarnessSource)
  .describe(
    "The AppWorld env: the agent writes Python that calls the apps' APIs, AppWorld's environment server runs it in the task's world, and the task's own checks grade the world at the end.",
  );
export type AppWorldEnvConfig = z.infer<typeof AppWorldEnvConfig>;
