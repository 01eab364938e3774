/**
 * The bubblewrap sandboxes AppWorld's processes run in (docs/appworld.md,
 * "Isolation"): the execution server, which runs the agent's code, and the
 * evaluator, which holds the ground truth and never runs that code.
 *
 * Both get their own network namespace (only a loopback of their own: the
 * worker speaks to the server through a unix socket), PID, IPC and UTS
 * namespaces, the SWE sandbox's seccomp filter (no mounts, no new
 * namespaces, no ptrace, ...), a read-only root holding only /usr, the
 * venv and its Python and what `mounts` names, sized tmpfs at /tmp and
 * /dev/shm, a clean environment, and prlimit limits. When the worker is
 * root, each sandbox runs as its own unprivileged uid (setpriv, inside, after
 * bubblewrap's mounts): the process limit counts that uid's processes, so it
 * holds for this sandbox alone, and the host can see from the uid which
 * processes are the sandbox's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pythonPrefix } from '../swe/trees';
import { asRoot, systemMounts } from '../swe/sandbox';

/** Where the sandbox sees the AppWorld root (APPWORLD_ROOT inside): no host path shows through. */
export const SANDBOX_ROOT = '/appworld';

export interface AppWorldLimits {
  /** Wall clock of one /execute; over it the sandbox is killed and the episode ends as a failure. */
  executeSeconds: number;
  /** Bytes of an /execute reply read; the reply is cut there while it streams. */
  replyBytes: number;
  /** Processes (and threads) of the sandbox's uid. */
  maxProcesses: number;
  /** Address space per process. */
  maxMemoryBytes: number;
  /** Largest file a process may write. */
  maxFileBytes: number;
  /** CPU seconds per process (the server's own over the whole episode). */
  cpuSeconds: number;
  /** The sandbox's /tmp and /dev/shm (tmpfs) each. */
  tmpBytes: number;
}

export const DEFAULT_APPWORLD_LIMITS: AppWorldLimits = {
  executeSeconds: 60,
  replyBytes: 1024 * 1024,
  maxProcesses: 64,
  maxMemoryBytes: 4 * 1024 ** 3,
  maxFileBytes: 256 * 1024 ** 2,
  cpuSeconds: 900,
  tmpBytes: 64 * 1024 ** 2,
};

export interface SandboxSpec {
  /** The venv the `appworld` package is installed in. */
  venv: string;
  /** Host folders (or files) mounted at `at`; read-only unless `writable`. */
  mounts: ReadonlyArray<{ host: string; at: string; writable?: boolean }>;
  limits: AppWorldLimits;
  /** The uid the sandbox runs as when the worker is root. */
  uid: number;
  /** Python source to run (`python -c`) and its arguments. */
  code: string;
  args: readonly string[];
}

/** The fd (in the child's stdio) bubblewrap reads the seccomp program from. */
export const SECCOMP_FD = 4;

/** The bubblewrap command line: fd 3 gets bubblewrap's info (the sandbox's init), fd SECCOMP_FD must hold the seccomp program. */
export function appWorldSandboxArgv(spec: SandboxSpec): string[] {
  const { limits } = spec;
  const prefix = pythonPrefix(spec.venv);
  const args = [
    '--info-fd', '3', '--unshare-pid', '--unshare-net', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try',
    '--die-with-parent', '--new-session', '--hostname', 'appworld', '--seccomp', String(SECCOMP_FD),
    // Not root: bubblewrap makes a user namespace (the sandbox's last: --disable-userns); root: setpriv below drops to `uid`.
    ...(asRoot() ? [] : ['--unshare-user', '--disable-userns']),
    ...systemMounts(['/etc/ld.so.cache', '/etc/localtime', '/etc/alternatives']),
  ];
  const binds = [...new Set([spec.venv, ...(prefix ? [prefix] : [])])];
  // Folders leading to a mount are made 0755: bubblewrap would copy the host's modes (a 0700 /root keeps the sandbox's uid out).
  for (const dir of leadingFolders([...binds, ...spec.mounts.map((m) => m.at)])) args.push('--perms', '0755', '--dir', dir);
  for (const dir of binds) args.push('--ro-bind', dir, dir);
  args.push('--proc', '/proc', '--dev', '/dev', '--size', String(limits.tmpBytes), '--tmpfs', '/dev/shm', '--remount-ro', '/dev');
  args.push('--perms', '1777', '--size', String(limits.tmpBytes), '--tmpfs', '/tmp');
  for (const mount of spec.mounts) args.push(mount.writable ? '--bind' : '--ro-bind', mount.host, mount.at);
  args.push('--remount-ro', '/', '--chdir', SANDBOX_ROOT, '--clearenv');
  const env = { PATH: `${path.join(spec.venv, 'bin')}:/usr/bin:/bin`, HOME: '/tmp', LANG: 'C.UTF-8', TMPDIR: '/tmp', APPWORLD_ROOT: SANDBOX_ROOT, PYTHONDONTWRITEBYTECODE: '1' };
  for (const [name, value] of Object.entries(env)) args.push('--setenv', name, value);
  args.push('--', '/usr/bin/prlimit', `--nproc=${limits.maxProcesses}`, `--as=${limits.maxMemoryBytes}`, `--fsize=${limits.maxFileBytes}`, `--cpu=${limits.cpuSeconds}`, '--core=0', '--');
  if (asRoot()) {
    args.push('/usr/bin/setpriv', `--reuid=${spec.uid}`, `--regid=${spec.uid}`, '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--');
  }
  args.push(path.join(spec.venv, 'bin', 'python'), '-c', spec.code, ...spec.args);
  return args;
}

/** Every folder above the given paths (not / or /usr, which the system mounts make), shallowest first. */
function leadingFolders(paths: readonly string[]): string[] {
  const folders = new Set<string>();
  for (const p of paths) {
    for (let dir = path.dirname(p); dir !== '/' && dir !== '/usr' && !dir.startsWith('/usr/'); dir = path.dirname(dir)) folders.add(dir);
  }
  return [...folders].filter((dir) => !paths.includes(dir)).sort((a, b) => a.split('/').length - b.split('/').length);
}

/** The uids AppWorld sandboxes run as (when the worker is root): a range no account uses, one uid per sandbox. */
const UID_BASE = 1_900_000_000;
let uidCounter = 0;
/** The next sandbox's uid: the worker's pid spreads workers of one host over the range. */
export function nextSandboxUid(): number {
  uidCounter = (uidCounter + 1) % 10_000;
  return UID_BASE + (process.pid % 10_000) * 10_000 + uidCounter;
}

/** Host pids of the processes running as `uid` (how the host sees what a sandbox left). */
export function processesOfUid(uid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, 'utf8');
      const real = /^Uid:\s+(\d+)/m.exec(status);
      if (real && Number(real[1]) === uid) pids.push(Number(entry));
    } catch {
      // gone while read
    }
  }
  return pids;
}
