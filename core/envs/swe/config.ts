/** The SWE env's config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, oneHarnessSource } from '../config-parts';
import { SandboxSizeConfig } from '../sandbox-config';

export const SweEnvConfig = z
  .strictObject({
    kind: z.literal('swe'),
    /** A SWE instance set (data/swe/instances.json, built on the machine by `harness-s swe setup`) or SWE-bench JSONL. */
    data: z.string().min(1),
    /** A folder of harness spec files (base + siblings); the shipped SWE pool when absent. */
    harnessDir: z.string().min(1).optional(),
    /** A frozen pool (by its hash) in place of the shipped or harnessDir pool. */
    pool: FrozenPoolHash,
    /** Each command's sandbox in total: memory (MiB, default 4096) and processes (default 256). */
    sandbox: SandboxSizeConfig,
  })
  .superRefine(oneHarnessSource);
export type SweEnvConfig = z.infer<typeof SweEnvConfig>;
