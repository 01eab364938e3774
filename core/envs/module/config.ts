/** A user's env in a module of its own: its config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, oneHarnessSource } from '../config-parts';

export const MODULE_KIND = 'module';

export const ModuleEnvConfig = z
  .strictObject({
    kind: z.literal(MODULE_KIND),
    /**
     * The env's module: a path (absolute, or relative to the worker's working
     * directory) or a package name the workers can require. Workers load it;
     * workflow code never does, so replays do not depend on it.
     */
    module: z.string().min(1),
    /** The module's own settings, checked by the module's `options` schema when it exports one. */
    options: z.record(z.string(), z.unknown()).default({}),
    /** A folder of harness spec files (base + siblings); the module's own pool when absent. */
    harnessDir: z.string().min(1).optional(),
    /** A frozen pool (by its hash) in place of the module's or harnessDir pool. */
    pool: FrozenPoolHash,
  })
  .superRefine(oneHarnessSource);
export type ModuleEnvConfig = z.infer<typeof ModuleEnvConfig>;

/** Whether `module` names a file (rather than a package). */
export function isModulePath(module: string): boolean {
  return module.startsWith('.') || module.startsWith('/');
}
