/** The SWE env's config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, HarnessDir, oneHarnessSource } from '../config-parts';
import { SandboxSizeConfig } from '../sandbox-config';

export const SweEnvConfig = z
  .strictObject({
    kind: z.literal('swe').describe('swe: SWE-bench style repository fixes, scored by their tests.'),
    data: z
      .string()
      .min(1)
      .describe(
        'A SWE instance set (data/swe/instances.json ships; `harness-s swe setup` builds its trees on the machine) or a SWE-bench JSONL file, as the workers see it.',
      ),
    harnessDir: HarnessDir,
    pool: FrozenPoolHash,
    sandbox: SandboxSizeConfig.describe("Each command's sandbox in total: memory (MiB, default 4096) and processes (default 256)."),
  })
  .superRefine(oneHarnessSource)
  .describe(
    "The SWE env: each episode a fresh copy of an instance's tree in a bubblewrap sandbox, the agent's tools (shell, editor, submit) as function calls, and SWE-bench's scoring of the final diff.",
  );
export type SweEnvConfig = z.infer<typeof SweEnvConfig>;
