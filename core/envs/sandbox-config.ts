/**
 * The size of one sandbox in an env's config: its memory and its processes,
 * in total (a cgroup per sandbox, core/envs/sandbox-cgroup.ts; per process
 * where the worker cannot make cgroups). Workflow code bundles the env
 * configs, so this module, like them, imports nothing that reaches outside.
 */
import { z } from 'zod';

export const SandboxSizeConfig = z
  .strictObject({
    memoryMiB: z
      .number()
      .int('sandbox.memoryMiB: a whole number of MiB, e.g. 4096')
      .min(64, 'sandbox.memoryMiB: at least 64 MiB (a shell, git and Python need that much)')
      .max(1024 * 1024, 'sandbox.memoryMiB: at most 1048576 MiB (1 TiB)')
      .optional()
      .describe("Memory of all of one sandbox's processes together, in MiB; the env's default when absent."),
    processes: z
      .number()
      .int('sandbox.processes: a whole number, e.g. 256')
      .min(8, 'sandbox.processes: at least 8 (a shell running a pipeline needs a few)')
      .max(65536, 'sandbox.processes: at most 65536')
      .optional()
      .describe("Processes and threads one sandbox may have at once; the env's default when absent."),
  })
  .optional();
export type SandboxSizeConfig = z.infer<typeof SandboxSizeConfig>;

/** The sandbox limits a config names (the env's defaults stand for the rest). */
export function sandboxSizeLimits(size: SandboxSizeConfig): { sandboxMemoryBytes?: number; maxProcesses?: number } {
  return {
    ...(size?.memoryMiB !== undefined ? { sandboxMemoryBytes: size.memoryMiB * 1024 ** 2 } : {}),
    ...(size?.processes !== undefined ? { maxProcesses: size.processes } : {}),
  };
}
