/**
 * A bubblewrap sandbox for a Python process (the servers envs start for
 * their episodes): its own network namespace (a loopback of its
 * own only: the worker speaks to it through a unix socket in a mounted
 * folder), PID, IPC and UTS namespaces, the SWE sandbox's seccomp filter (no
 * mounts, no new namespaces, no ptrace, ...), a read-only root holding only
 * /usr, the venv and its Python and what `mounts` names, sized tmpfs at /tmp
 * and /dev/shm, a clean environment, and prlimit limits. When the worker is
 * root, each sandbox runs as its own unprivileged uid (setpriv, inside, after
 * bubblewrap's mounts): the process limit counts that uid's processes, so it
 * holds for this sandbox alone, and the host can see from the uid which
 * processes are the sandbox's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pythonPrefix } from './swe/trees';
import { asRoot, systemMounts } from './swe/sandbox';

export interface PythonSandboxLimits {
  /** Processes (and threads) of the sandbox's uid. */
  maxProcesses: number;
  /** Address space per process. */
  maxMemoryBytes: number;
  /** Largest file a process may write. */
  maxFileBytes: number;
  /** CPU seconds per process. */
  cpuSeconds: number;
  /** The sandbox's /tmp and /dev/shm (tmpfs) each. */
  tmpBytes: number;
}

export interface SandboxSpec {
  /** The venv whose Python runs in the sandbox (mounted read-only). */
  venv: string;
  /** Host folders (or files) mounted at `at`; read-only unless `writable`. */
  mounts: ReadonlyArray<{ host: string; at: string; writable?: boolean }>;
  limits: PythonSandboxLimits;
  /** The sandbox's hostname, working folder (a mount's `at`) and environment (besides PATH, HOME, LANG, TMPDIR). */
  hostname: string;
  workdir: string;
  env?: Record<string, string>;
  /** The uid the sandbox runs as when the worker is root. */
  uid: number;
  /** Python source to run (`python -c`) and its arguments. */
  code: string;
  args: readonly string[];
}

/** The fd (in the child's stdio) bubblewrap reads the seccomp program from. */
export const SECCOMP_FD = 4;

/** The bubblewrap command line: fd 3 gets bubblewrap's info (the sandbox's init), fd SECCOMP_FD must hold the seccomp program. */
export function pythonSandboxArgv(spec: SandboxSpec): string[] {
  const { limits } = spec;
  const prefix = pythonPrefix(spec.venv);
  const args = [
    '--info-fd',
    '3',
    '--unshare-pid',
    '--unshare-net',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    '--die-with-parent',
    '--new-session',
    '--hostname',
    spec.hostname,
    '--seccomp',
    String(SECCOMP_FD),
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
  args.push('--remount-ro', '/', '--chdir', spec.workdir, '--clearenv');
  const env = {
    PATH: `${path.join(spec.venv, 'bin')}:/usr/bin:/bin`,
    HOME: '/tmp',
    LANG: 'C.UTF-8',
    TMPDIR: '/tmp',
    PYTHONDONTWRITEBYTECODE: '1',
    ...spec.env,
  };
  for (const [name, value] of Object.entries(env)) args.push('--setenv', name, value);
  args.push(
    '--',
    '/usr/bin/prlimit',
    `--nproc=${limits.maxProcesses}`,
    `--as=${limits.maxMemoryBytes}`,
    `--fsize=${limits.maxFileBytes}`,
    `--cpu=${limits.cpuSeconds}`,
    '--core=0',
    '--',
  );
  if (asRoot()) {
    args.push(
      '/usr/bin/setpriv',
      `--reuid=${spec.uid}`,
      `--regid=${spec.uid}`,
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--no-new-privs',
      '--',
    );
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

/** The uids sandboxes run as (when the worker is root): a range no account uses, one uid per sandbox. */
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
