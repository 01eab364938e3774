/**
 * A cgroup per sandbox, so a sandbox's memory and processes are limited in
 * total, not per process: prlimit's address-space limit lets four forked
 * children each hold up to the limit, and its process limit counts a uid's
 * processes across every sandbox of that uid.
 *
 * cgroup v2 is used where its memory and pids controllers are available (its
 * cgroup.controllers lists them), v1's memory and pids hierarchies otherwise.
 * Each sandbox gets a child group of a `harness-s` parent, named after the
 * worker (its pid and that pid's start time, so a sweeper can tell a dead
 * worker's groups from a live one's) and a counter:
 *
 * - memory: memory.max (v2) or memory.limit_in_bytes and, when there,
 *   memory.memsw.limit_in_bytes (v1), so swap does not dodge the limit;
 * - processes (and threads): pids.max.
 *
 * The sandbox's first process joins the group before it can fork: the worker
 * starts `/bin/sh`, which writes its own pid into the group's cgroup.procs
 * and then execs the sandbox's command line (the same process, now in the
 * group; everything it starts is born there).
 *
 * Where cgroups cannot be used (the worker is not root and has no delegated
 * group, or no controller is mounted writable), sandboxes keep only their
 * per-process limits; that is said once (a process warning) and by
 * `harness-s doctor`.
 */
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startTimeOf } from './process-start';

/** What one sandbox may use in total. */
export interface CgroupLimits {
  /** Memory of all its processes together (resident and page cache it charges; swap too on v1 where memsw is there). */
  memoryBytes: number;
  /** Processes and threads at once. */
  processes: number;
}

/** The parent group, under each hierarchy's mount. */
export const CGROUP_PARENT = 'harness-s';

/** Where sandbox groups can be made: one folder (v2) or the memory and pids hierarchies' (v1). */
type Layout = { version: 2; root: string } | { version: 1; memory: string; pids: string };

export type CgroupSupport = { available: true; version: 1 | 2; parents: string[] } | { available: false; reason: string };

interface Mount {
  dir: string;
  type: string;
  options: string[];
}

/** The cgroup file systems mounted here, as /proc/self/mounts lists them. */
function cgroupMounts(mountsText: string): Mount[] {
  return (
    mountsText
      .split('\n')
      .map((line) => line.split(' '))
      .filter((f) => f.length >= 4 && (f[2] === 'cgroup' || f[2] === 'cgroup2'))
      // /proc/self/mounts escapes spaces and the like in octal (\040).
      .map((f) => ({
        dir: f[1].replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))),
        type: f[2],
        options: f[3].split(','),
      }))
  );
}

/**
 * Which cgroup version to use, from the mounts and each v2 mount's
 * cgroup.controllers: v2 when one lists both memory and pids; else v1 when
 * both controllers are mounted; else the reason there is none.
 */
export function chooseLayout(mountsText: string, controllersOf: (dir: string) => string | null): Layout | { reason: string } {
  const mounts = cgroupMounts(mountsText);
  for (const mount of mounts.filter((m) => m.type === 'cgroup2')) {
    const controllers = (controllersOf(mount.dir) ?? '').split(/\s+/);
    if (controllers.includes('memory') && controllers.includes('pids')) return { version: 2, root: mount.dir };
  }
  const v1 = (controller: string) => mounts.find((m) => m.type === 'cgroup' && m.options.includes(controller))?.dir;
  const memory = v1('memory');
  const pids = v1('pids');
  if (memory && pids) return { version: 1, memory, pids };
  if (mounts.length === 0) return { reason: 'no cgroup file system is mounted' };
  return {
    reason: `neither cgroup v2 with its memory and pids controllers nor cgroup v1's memory and pids hierarchies are mounted (cgroup mounts: ${mounts.map((m) => `${m.dir} (${m.type})`).join(', ')})`,
  };
}

function readText(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

/** This worker's prefix for its groups: its pid and that pid's start time. */
const workerTag = (): string => `w${process.pid}-${startTimeOf(process.pid) ?? '0'}`;

/** A group's worker, from its name: null when the name is not one of ours. */
export function groupWorker(name: string): { pid: number; start: string } | null {
  const match = /^w(\d+)-(\d+)-\d+$/.exec(name);
  return match ? { pid: Number(match[1]), start: match[2] } : null;
}

let layout: Layout | null = null;
let support: CgroupSupport | null = null;

function parentsOf(l: Layout): string[] {
  return l.version === 2 ? [path.join(l.root, CGROUP_PARENT)] : [path.join(l.memory, CGROUP_PARENT), path.join(l.pids, CGROUP_PARENT)];
}

/**
 * Whether sandboxes get their own cgroup here, and why not when they do not.
 * Probed once per process: the parent groups are made, and a child group is
 * made, given limits and removed.
 */
export function cgroupSupport(): CgroupSupport {
  if (support) return support;
  const chosen = chooseLayout(readText('/proc/self/mounts') ?? '', (dir) => readText(path.join(dir, 'cgroup.controllers')));
  if ('reason' in chosen) {
    support = { available: false, reason: chosen.reason };
    return support;
  }
  try {
    if (chosen.version === 2) {
      // A v2 group's children get a controller only when the group enables it for them.
      enableV2Controllers(chosen.root);
      mkdirSync(path.join(chosen.root, CGROUP_PARENT), { recursive: true });
      enableV2Controllers(path.join(chosen.root, CGROUP_PARENT));
    } else {
      for (const parent of parentsOf(chosen)) mkdirSync(parent, { recursive: true });
    }
    layout = chosen;
    const probe = SandboxCgroup.make({ memoryBytes: 256 * 1024 ** 2, processes: 16 }, 'probe');
    probe.removeNow();
  } catch (err) {
    layout = null;
    support = { available: false, reason: `cannot make a group under ${parentsOf(chosen).join(' and ')}: ${(err as Error).message}` };
    return support;
  }
  support = { available: true, version: chosen.version, parents: parentsOf(chosen) };
  return support;
}

function enableV2Controllers(dir: string): void {
  const enabled = (readText(path.join(dir, 'cgroup.subtree_control')) ?? '').split(/\s+/);
  if (enabled.includes('memory') && enabled.includes('pids')) return;
  writeFileSync(path.join(dir, 'cgroup.subtree_control'), '+memory +pids');
}

let warned = false;

/** Said once per process: sandboxes run with per-process limits only. */
function warnOnce(reason: string): void {
  if (warned) return;
  warned = true;
  process.emitWarning(
    `sandboxes get no cgroup of their own (${reason}): their memory and processes are limited per process only (prlimit)`,
    { code: 'HARNESS_S_NO_SANDBOX_CGROUP' },
  );
}

let counter = 0;
let swept = false;

/** How long removing a group waits for its last processes to go before leaving it to the sweeper. */
const REMOVE_WAIT_MS = 2000;

/** One sandbox's group: its folders (one on v2, memory's and pids' on v1). */
export class SandboxCgroup {
  private removed = false;

  private constructor(
    readonly name: string,
    readonly version: 1 | 2,
    /** The memory group's folder and the pids group's (the same folder on v2). */
    readonly memoryDir: string,
    readonly pidsDir: string,
    readonly limits: CgroupLimits,
  ) {}

  /**
   * A group for one sandbox with `limits`, or null when cgroups cannot be
   * used here (then said once). The first group of a process sweeps what dead
   * workers left.
   */
  static create(limits: CgroupLimits): SandboxCgroup | null {
    const found = cgroupSupport();
    if (!found.available) {
      warnOnce(found.reason);
      return null;
    }
    if (!swept) {
      swept = true;
      sweepCgroups();
    }
    return SandboxCgroup.make(limits, String(++counter));
  }

  /** Makes the group (the layout is known); a group that cannot be given its limits is removed and the error thrown. */
  static make(limits: CgroupLimits, suffix: string): SandboxCgroup {
    if (!layout) throw new Error('no cgroup layout');
    const name = `${workerTag()}-${suffix === 'probe' ? '0' : suffix}`;
    const [memoryParent, pidsParent] =
      layout.version === 2 ? [path.join(layout.root, CGROUP_PARENT), path.join(layout.root, CGROUP_PARENT)] : parentsOf(layout);
    const group = new SandboxCgroup(name, layout.version, path.join(memoryParent, name), path.join(pidsParent, name), limits);
    for (const dir of new Set([group.memoryDir, group.pidsDir])) mkdirSync(dir);
    try {
      const memory = String(Math.floor(limits.memoryBytes));
      if (group.version === 2) {
        writeFileSync(path.join(group.memoryDir, 'memory.max'), memory);
        // No swap, and an OOM kill takes the whole group at once (a sandbox is one unit).
        group.writeIfThere('memory.swap.max', '0');
        group.writeIfThere('memory.oom.group', '1');
      } else {
        writeFileSync(path.join(group.memoryDir, 'memory.limit_in_bytes'), memory);
        group.writeIfThere('memory.memsw.limit_in_bytes', memory);
      }
      writeFileSync(path.join(group.pidsDir, 'pids.max'), String(limits.processes));
    } catch (err) {
      group.removeNow();
      throw err;
    }
    return group;
  }

  private writeIfThere(file: string, value: string): void {
    try {
      writeFileSync(path.join(this.memoryDir, file), value);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }

  /**
   * `argv` started in this group: a shell writes its own pid into the
   * group's cgroup.procs (memory's and pids' on v1), then execs `argv`, so
   * its first process is in the group before it runs. A write that fails
   * ends the shell (exit 125, the reason on stderr) and nothing runs.
   */
  wrap(argv: readonly string[]): [string, string[]] {
    const procs = [...new Set([this.memoryDir, this.pidsDir])].map((dir) => path.join(dir, 'cgroup.procs'));
    // The paths are ours (no quote in them): they go into the script as single-quoted words.
    const join = procs.map((file) => `echo $$ > '${file}'`).join(' && ');
    return [
      '/bin/sh',
      [
        '-c',
        `${join} || { echo "harness-s: the sandbox could not join its cgroup ${this.name}" >&2; exit 125; }; exec "$@"`,
        'sh',
        ...argv,
      ],
    ];
  }

  private read(dir: string, file: string): string | null {
    return readText(path.join(dir, file));
  }

  /** A counter of a flat keyed file (memory.events, memory.oom_control, pids.events): `key N`. */
  private counter(dir: string, file: string, key: string): number | null {
    const text = this.read(dir, file);
    const match = text === null ? null : new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
    return match ? Number(match[1]) : null;
  }

  /** Whether a process of the group was killed for the group's memory limit (false once the group is removed). */
  memoryLimitReached(): boolean {
    if (this.version === 2) return (this.counter(this.memoryDir, 'memory.events', 'oom_kill') ?? 0) > 0;
    // v1: the oom_kill count (Linux 4.13 and later); a group stuck in OOM counts too.
    return (
      (this.counter(this.memoryDir, 'memory.oom_control', 'oom_kill') ?? 0) > 0 ||
      this.counter(this.memoryDir, 'memory.oom_control', 'under_oom') === 1
    );
  }

  /** Whether a fork or clone failed at the group's process limit. */
  processLimitReached(): boolean {
    return (this.counter(this.pidsDir, 'pids.events', 'max') ?? 0) > 0;
  }

  /** The most memory the group held at once (v1's max_usage_in_bytes, v2's memory.peak where the kernel has it). */
  peakMemoryBytes(): number | null {
    const text = this.read(this.memoryDir, this.version === 2 ? 'memory.peak' : 'memory.max_usage_in_bytes');
    return text === null ? null : Number(text.trim());
  }

  /** Host pids of the group's processes. */
  processes(): number[] {
    return groupProcesses(this.pidsDir);
  }

  /** Kills what is left in the group and removes it; what will not go within REMOVE_WAIT_MS is left to the sweeper. */
  async remove(): Promise<void> {
    if (this.removed) return;
    const deadline = Date.now() + REMOVE_WAIT_MS;
    while (!this.tryRemove() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  /** As remove(), without waiting: true when the group is gone. */
  removeNow(): boolean {
    return this.tryRemove();
  }

  private tryRemove(): boolean {
    if (this.removed) return true;
    this.removed = [...new Set([this.pidsDir, this.memoryDir])].map((dir) => removeGroup(dir)).every(Boolean);
    return this.removed;
  }
}

function groupProcesses(dir: string): number[] {
  return (readText(path.join(dir, 'cgroup.procs')) ?? '').split('\n').filter(Boolean).map(Number);
}

/** Kills a group's processes and removes its folder: true when it is gone (or was never there). */
function removeGroup(dir: string): boolean {
  for (const pid of groupProcesses(dir)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  try {
    rmdirSync(dir);
    return true;
  } catch (err) {
    // EBUSY: processes still leaving (killed, not yet reaped).
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/**
 * Removes the groups of workers that are gone (no process with the group's
 * pid and start time): what a worker that died mid-sandbox left, its
 * processes killed first. Returns the groups removed.
 */
export function sweepCgroups(parents: readonly string[] = layout ? parentsOf(layout) : []): string[] {
  const removed: string[] = [];
  for (const parent of parents) {
    let names: string[];
    try {
      names = readdirSync(parent, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name);
    } catch {
      continue;
    }
    for (const name of names) {
      const worker = groupWorker(name);
      if (!worker || startTimeOf(worker.pid) === worker.start) continue;
      if (removeGroup(path.join(parent, name))) removed.push(path.join(parent, name));
    }
  }
  return removed;
}

/** A memory size as a limit is written: whole GiB or MiB when it is one (4 GiB, 256 MiB), bytes otherwise. */
export function memoryText(bytes: number): string {
  if (bytes >= 1024 ** 3 && bytes % 1024 ** 3 === 0) return `${bytes / 1024 ** 3} GiB`;
  if (bytes % 1024 ** 2 === 0) return `${bytes / 1024 ** 2} MiB`;
  return `${bytes} bytes`;
}
