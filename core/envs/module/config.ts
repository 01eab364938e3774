/** A user's env in a module of its own: its config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, HarnessDir, oneHarnessSource } from '../config-parts';

export const MODULE_KIND = 'module';

export const ModuleEnvConfig = z
  .strictObject({
    kind: z.literal(MODULE_KIND).describe('module: your own env, in a module the workers load.'),
    /**
     * Workers load the module; workflow code never does, so replays do not depend on it.
     */
    module: z
      .string()
      .min(1)
      .describe(
        "The env's module: a path (starting . or /, relative to the workers' working directory) or a package name the workers can require.",
      ),
    options: z
      .record(z.string().describe('An option of the module.'), z.unknown())
      .default({})
      .describe("The module's own settings, checked by the module's `options` schema when it exports one."),
    harnessDir: HarnessDir.describe(
      "A folder of harness spec files (the base and its siblings) in place of the module's own pool; not with pool.",
    ),
    pool: FrozenPoolHash.describe(
      "A frozen pool by its hash (as `harness-s pool list` prints it), read from $HARNESS_S_POOLS_DIR/<hash>/ and checked against the hash, in place of the module's own pool; not with harnessDir.",
    ),
  })
  .superRefine(oneHarnessSource)
  .describe(
    'An env of your own: a module that exports its name, harness pool and create function (docs/writing-an-env.md; examples/module-env/ is a complete one).',
  );
export type ModuleEnvConfig = z.infer<typeof ModuleEnvConfig>;

/** Whether `module` names a file (rather than a package). */
export function isModulePath(module: string): boolean {
  return module.startsWith('.') || module.startsWith('/');
}
