/**
 * Workspaces: a fresh copy of an instance's tree per episode (and per
 * scoring), given to the sandbox user, removed when the episode closes. Their
 * folder names carry their creation time, so the sweeper can remove what a
 * worker that died mid-episode left behind. No process outlives a command
 * (each runs in its own PID namespace), so folders (and the file systems
 * mounted in them) are all there is to sweep.
 *
 * A workspace may grow by WORKSPACE_GROWTH over its instance's tree. When the
 * worker is root, the tree is copied onto a file system of that size
 * (sized-folder.ts), so writes past it fail with ENOSPC, however they are
 * made; the command that filled it is killed and the result says so. When it
 * is not, the workspace is a plain folder, measured while commands run.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { makeSizedFolder, releaseMounts } from '../sized-folder';
import { giveToSandbox, runSandboxed, WORKSPACE, type CommandResult, type SandboxLimits } from './sandbox';
import type { WorkspaceBound } from './workspace-size';
import { SweDataError, type HarnessSSource, type SweInstance } from './instances';
import { pythonPrefix, run, sweHome } from './trees';

export const WORKSPACE_PREFIX = 'swe-';

/**
 * What a workspace may add to its instance's tree: room for builds, logs and
 * test output many times over, far from filling a worker's disk.
 */
export const WORKSPACE_GROWTH: WorkspaceBound = { bytes: 1024 ** 3, entries: 100_000 };

/**
 * Where workspaces are made: $HARNESS_S_SWE_WORK, default <SWE home>/work.
 * The sandbox user must reach it, and no other user may make entries in the
 * folder above it (not a shared /tmp: a planted name could redirect a root worker).
 */
export function workRoot(): string {
  return path.resolve(process.env.HARNESS_S_SWE_WORK || path.join(sweHome(), 'work'));
}

/**
 * Removes a folder a sandbox wrote; a worker that is not root may have
 * to give itself back the rights the agent took away (chmod 000), and Node's
 * rmSync fails on trees deeper than a path may be long, which an agent can
 * build, so rm(1) takes over then. File systems mounted in it (sized folders)
 * are unmounted first, and nothing is removed while one is left: a removal
 * never follows into a mount. `loops` also detaches loop devices left backed
 * by an image in it (for sweepers). Never throws: what stays is the sweeper's.
 */
export function removeTree(dir: string, options: { loops?: boolean } = {}): boolean {
  if (!releaseMounts(dir, options)) return false;
  try {
    rmSync(dir, { recursive: true, force: true });
    return true;
  } catch {
    spawnSync('chmod', ['-R', 'u+rwX', dir]);
    spawnSync('rm', ['-rf', '--one-file-system', '--', dir], { stdio: 'ignore' });
    return !existsSync(dir);
  }
}

/** The instance's own source, or why this runtime cannot run it. */
export function sourceOf(instance: SweInstance): HarnessSSource {
  if (!instance.harness_s) {
    throw new SweDataError(
      `instance ${instance.instance_id} (${instance.repo}) has no tree this runtime can build: SWE-bench and SWE-Gym instances run in their ` +
        'per-instance Docker images, and this project has no Docker runtime yet (docs/swe.md); build instances with `harness-s swe setup`',
    );
  }
  if (!existsSync(path.join(instance.harness_s.tree, '.git'))) {
    throw new SweDataError(
      `instance ${instance.instance_id}: its tree ${instance.harness_s.tree} is gone; run \`harness-s swe setup\` again`,
    );
  }
  return instance.harness_s;
}

/** Read-only mounts and environment for commands on an instance's tree. */
export function commandContext(source: HarnessSSource) {
  const prefix = pythonPrefix(source.venv);
  return {
    readOnly: [source.venv, ...(prefix ? [prefix] : [])],
    path: [path.join(source.venv, 'bin')],
    env: {
      VIRTUAL_ENV: source.venv,
      PYTHONPATH: source.pythonpath.map((p) => path.posix.join(WORKSPACE, p)).join(':'),
      PYTHONDONTWRITEBYTECODE: '1',
      PIP_NO_INDEX: '1',
      GIT_CONFIG_NOSYSTEM: '1',
    },
  };
}

/** Where files for the sandbox to read (patches) are mounted, read-only. */
export const IO_DIR = '/io';

/** Sizes of instances' trees (they do not change once built), measured once per process. */
const treeSizes = new Map<string, WorkspaceBound>();

/** A tree's disk use and entries, as measureTree counts them. */
function treeSize(tree: string): WorkspaceBound {
  let size = treeSizes.get(tree);
  if (!size) {
    const blocks = run('find', [tree, '-xdev', '-printf', '%b\\n'], { what: `measuring ${tree}` })
      .split('\n')
      .filter(Boolean);
    // %b counts 512-byte blocks.
    size = { bytes: blocks.reduce((sum, b) => sum + Number(b), 0) * 512, entries: blocks.length };
    treeSizes.set(tree, size);
  }
  return size;
}

export class Workspace {
  private closed = false;

  /**
   * `dir` holds `repo/` (mounted at /workspace) and `io/` (mounted read-only
   * at /io: patches, and a pristine copy of the tree's git repository, so the
   * answer's diff does not depend on what the agent did to `.git`).
   */
  private constructor(
    readonly dir: string,
    readonly source: HarnessSSource,
    readonly baseCommit: string,
    /** The instance's tree's size plus the growth allowed. */
    readonly bound: WorkspaceBound,
    /** Whether `repo` is a file system of the bound's size (else a plain folder, watched by polling). */
    readonly sized: boolean,
  ) {}

  get repo(): string {
    return path.join(this.dir, 'repo');
  }

  /** Limits of the workspace's commands besides each command's own (the env's sandbox size). */
  private limits: Partial<SandboxLimits> = {};

  /**
   * A fresh copy of the instance's tree (with its git history), owned by the sandbox user; its commands run with `limits`.
   * The copy is on a file system of the tree's size plus `growth` when the worker can mount one.
   */
  static create(
    instance: SweInstance,
    label: string,
    limits: Partial<SandboxLimits> = {},
    growth: WorkspaceBound = WORKSPACE_GROWTH,
  ): Workspace {
    const source = sourceOf(instance);
    const root = workRoot();
    mkdirSync(root, { recursive: true, mode: 0o755 });
    const safeLabel = label.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 60);
    const dir = path.join(root, `${WORKSPACE_PREFIX}${Date.now()}-${randomBytes(4).toString('hex')}-${safeLabel}`);
    mkdirSync(path.join(dir, 'io'), { recursive: true, mode: 0o755 });
    let workspace: Workspace;
    try {
      const tree = treeSize(source.tree);
      const bound = { bytes: tree.bytes + growth.bytes, entries: tree.entries + growth.entries };
      workspace = new Workspace(dir, source, instance.base_commit, bound, makeSizedFolder(path.join(dir, 'repo'), bound));
      workspace.limits = limits;
      run('cp', ['-a', `${source.tree}/.`, workspace.repo], { what: `copying ${instance.instance_id}'s tree` });
      run('cp', ['-a', path.join(source.tree, '.git'), path.join(dir, 'io', 'git')], {
        what: `copying ${instance.instance_id}'s git repository`,
      });
      run('chmod', ['-R', 'a+rX', path.join(dir, 'io')], { what: `opening ${dir}/io to the sandbox user` });
      giveToSandbox(workspace.repo);
    } catch (err) {
      removeTree(dir);
      throw err;
    }
    return workspace;
  }

  /** Runs a shell command on the workspace in the sandbox; `workspaceOverBound` in the result when the workspace grew past its bound (or filled its file system). */
  async exec(command: string, limits?: Partial<SandboxLimits>, signal?: AbortSignal): Promise<CommandResult> {
    if (this.closed) throw new Error(`workspace ${this.dir} is closed`);
    return runSandboxed(
      command,
      {
        workspace: this.repo,
        mounts: [{ host: path.join(this.dir, 'io'), at: IO_DIR }],
        ...commandContext(this.source),
        limits: { ...this.limits, ...limits },
        workspaceBound: this.bound,
        workspaceSized: this.sized,
      },
      signal,
    );
  }

  /** A file commands can read at /io/<name> (outside the repository, which the sandbox controls): for patches. */
  stage(name: string, text: string): string {
    writeFileSync(path.join(this.dir, 'io', name), text, { mode: 0o644 });
    return path.posix.join(IO_DIR, name);
  }

  /**
   * Every change to the tree since its base commit, new files included, as a
   * patch: the agent's answer. Taken with the pristine repository in /io, a
   * throwaway index and object store in /tmp, and no user or repository
   * config, so neither a commit, a deleted or edited `.git` nor a `.gitconfig`
   * in the workspace changes it. `error` when there is no usable answer.
   */
  async diff(signal?: AbortSignal): Promise<{ patch: string; error: string | null }> {
    const git = [
      'export GIT_DIR=/io/git GIT_WORK_TREE=/workspace GIT_INDEX_FILE=/tmp/harness-s-index GIT_OBJECT_DIRECTORY=/tmp/harness-s-objects',
      'GIT_ALTERNATE_OBJECT_DIRECTORIES=/io/git/objects HOME=/tmp GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1;',
      `mkdir -p /tmp/harness-s-objects && git read-tree ${this.baseCommit} && git add -A 2>/dev/null &&`,
      `git -c core.quotepath=off diff --cached --binary --no-color --no-ext-diff ${this.baseCommit} 2>/dev/null`,
    ].join(' ');
    const limit = 8 * 1024 * 1024;
    const result = await this.exec(git, { timeoutSeconds: 120, maxOutputBytes: limit, killAfterOutputBytes: 2 * limit }, signal);
    if (result.workspaceOverBound) return { patch: '', error: 'the workspace grew past its bound' };
    if (result.memoryLimitReached) return { patch: '', error: "taking the diff reached the sandbox's memory limit" };
    if (result.outputTruncated || result.flooded) return { patch: '', error: `the changes make a patch of over ${limit / 1024 / 1024} MB` };
    if (result.exitCode !== 0)
      return {
        patch: '',
        error: result.timedOut ? 'taking the diff ran over its time limit' : `taking the diff failed (exit ${result.exitCode})`,
      };
    return { patch: result.output, error: null };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    removeTree(this.dir);
  }
}

/** The creation time in a workspace folder's name, or null when it is not one. */
export function workspaceCreatedAt(name: string): number | null {
  const match = new RegExp(`^${WORKSPACE_PREFIX}(\\d{13})-`).exec(name);
  return match ? Number(match[1]) : null;
}

/** Removes workspaces older than `olderThanMs` (their file systems unmounted first): what a worker that died mid-episode left. Returns their names. */
export function sweepWorkspaces(options: { olderThanMs: number; now?: number; root?: string }): string[] {
  const root = options.root ?? workRoot();
  if (!existsSync(root)) return [];
  const now = options.now ?? Date.now();
  const removed: string[] = [];
  for (const name of readdirSync(root)) {
    const createdAt = workspaceCreatedAt(name);
    if (createdAt === null || now - createdAt <= options.olderThanMs) continue;
    if (removeTree(path.join(root, name), { loops: true })) removed.push(name);
  }
  return removed;
}
