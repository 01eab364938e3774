/**
 * The bubblewrap sandboxes AppWorld's processes run in (docs/appworld.md,
 * "Isolation"): the execution server, which runs the agent's code, and the
 * evaluator, which holds the ground truth and never runs that code. What the
 * sandbox holds back (network, namespaces, syscalls, limits, a uid of its
 * own) is core/envs/python-sandbox.ts; here are AppWorld's limits and root.
 */
import { pythonSandboxArgv, type SandboxSpec as PythonSandboxSpec } from '../python-sandbox';

export { nextSandboxUid, processesOfUid, SECCOMP_FD } from '../python-sandbox';

/** Where the sandbox sees the AppWorld root (APPWORLD_ROOT inside): no host path shows through. */
export const SANDBOX_ROOT = '/appworld';

export interface AppWorldLimits {
  /** Wall clock of one /execute; over it the sandbox is killed and the episode ends as a failure. */
  executeSeconds: number;
  /** Bytes of an /execute reply read; the reply is cut there while it streams. */
  replyBytes: number;
  /** Processes (and threads) of the sandbox's uid, and of its cgroup. */
  maxProcesses: number;
  /** Address space per process. */
  maxMemoryBytes: number;
  /** Memory of the whole sandbox, all its processes together (its cgroup's limit, where there is one). */
  sandboxMemoryBytes: number;
  /** Largest file a process may write. */
  maxFileBytes: number;
  /** CPU seconds per process (the server's own over the whole episode). */
  cpuSeconds: number;
  /** The sandbox's /tmp and /dev/shm (tmpfs) each. */
  tmpBytes: number;
  /** The episode's output folder (the world it saves, AppWorld's logs): a file system of this size when the worker is root. */
  outputsBytes: number;
}

export const DEFAULT_APPWORLD_LIMITS: AppWorldLimits = {
  executeSeconds: 60,
  replyBytes: 1024 * 1024,
  maxProcesses: 64,
  maxMemoryBytes: 4 * 1024 ** 3,
  sandboxMemoryBytes: 4 * 1024 ** 3,
  maxFileBytes: 256 * 1024 ** 2,
  cpuSeconds: 900,
  tmpBytes: 64 * 1024 ** 2,
  outputsBytes: 1024 ** 3,
};

export interface SandboxSpec extends Omit<PythonSandboxSpec, 'limits' | 'hostname' | 'workdir' | 'env'> {
  limits: AppWorldLimits;
}

/** AppWorld's sandbox: its root at SANDBOX_ROOT (APPWORLD_ROOT inside); core/envs/python-sandbox.ts holds the rest. */
export function appWorldSandboxArgv(spec: SandboxSpec): string[] {
  return pythonSandboxArgv({ ...spec, hostname: 'appworld', workdir: SANDBOX_ROOT, env: { APPWORLD_ROOT: SANDBOX_ROOT } });
}
