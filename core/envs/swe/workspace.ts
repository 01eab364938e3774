/**
 * Workspaces: a fresh copy of an instance's tree per episode (and per
 * scoring), given to the sandbox user, removed when the episode closes. Their
 * folder names carry their creation time, so the sweeper can remove what a
 * worker that died mid-episode left behind. No process outlives a command
 * (each runs in its own PID namespace), so folders are all there is to sweep.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { giveToSandbox, runSandboxed, WORKSPACE, type CommandResult, type SandboxLimits } from './sandbox';
import { SweDataError, type HarnessSSource, type SweInstance } from './instances';
import { pythonPrefix, run } from './trees';

export const WORKSPACE_PREFIX = 'swe-';

/** Where workspaces are made: $HARNESS_S_SWE_WORK, default <tmp>/harness-s-swe-work (the sandbox user must reach it). */
export function workRoot(): string {
  return path.resolve(process.env.HARNESS_S_SWE_WORK || path.join(os.tmpdir(), 'harness-s-swe-work'));
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
    throw new SweDataError(`instance ${instance.instance_id}: its tree ${instance.harness_s.tree} is gone; run \`harness-s swe setup\` again`);
  }
  return instance.harness_s;
}

const prefixes = new Map<string, string | null>();

/** Read-only mounts and environment for commands on an instance's tree. */
export function commandContext(source: HarnessSSource) {
  if (!prefixes.has(source.venv)) prefixes.set(source.venv, pythonPrefix(source.venv));
  const prefix = prefixes.get(source.venv) ?? null;
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

export class Workspace {
  private closed = false;

  /** `dir` holds `repo/` (mounted at /workspace) and `io/` (mounted read-only at /io). */
  private constructor(
    readonly dir: string,
    readonly source: HarnessSSource,
  ) {}

  get repo(): string {
    return path.join(this.dir, 'repo');
  }

  /** A fresh copy of the instance's tree (with its git history), owned by the sandbox user. */
  static create(instance: SweInstance, label: string): Workspace {
    const source = sourceOf(instance);
    const root = workRoot();
    mkdirSync(root, { recursive: true, mode: 0o755 });
    const safeLabel = label.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 60);
    const dir = path.join(root, `${WORKSPACE_PREFIX}${Date.now()}-${randomBytes(4).toString('hex')}-${safeLabel}`);
    mkdirSync(path.join(dir, 'io'), { recursive: true, mode: 0o755 });
    const workspace = new Workspace(dir, source);
    run('cp', ['-a', `${source.tree}/.`, workspace.repo], { what: `copying ${instance.instance_id}'s tree` });
    giveToSandbox(workspace.repo);
    return workspace;
  }

  /** Runs a shell command on the workspace in the sandbox. */
  exec(command: string, limits?: Partial<SandboxLimits>, signal?: AbortSignal): Promise<CommandResult> {
    if (this.closed) throw new Error(`workspace ${this.dir} is closed`);
    return runSandboxed(command, { workspace: this.repo, mounts: [{ host: path.join(this.dir, 'io'), at: IO_DIR }], ...commandContext(this.source), limits }, signal);
  }

  /** A file commands can read at /io/<name> (outside the repository, which the sandbox controls): for patches. */
  stage(name: string, text: string): string {
    writeFileSync(path.join(this.dir, 'io', name), text, { mode: 0o644 });
    return path.posix.join(IO_DIR, name);
  }

  /** Every change to the tree since its commit, new files included, as a patch: the agent's answer. */
  async diff(signal?: AbortSignal): Promise<string> {
    const result = await this.exec('git add -A >/dev/null 2>&1; git -c core.quotepath=off diff --cached --binary --no-color --no-ext-diff HEAD', { timeoutSeconds: 60, maxOutputBytes: 8 * 1024 * 1024 }, signal);
    if (result.exitCode !== 0) throw new Error(`git diff in ${this.dir} failed: ${result.output.slice(0, 500)}`);
    return result.output;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The creation time in a workspace folder's name, or null when it is not one. */
export function workspaceCreatedAt(name: string): number | null {
  const match = new RegExp(`^${WORKSPACE_PREFIX}(\\d{13})-`).exec(name);
  return match ? Number(match[1]) : null;
}

/** Removes workspaces older than `olderThanMs`: what a worker that died mid-episode left. Returns their names. */
export function sweepWorkspaces(options: { olderThanMs: number; now?: number; root?: string }): string[] {
  const root = options.root ?? workRoot();
  if (!existsSync(root)) return [];
  const now = options.now ?? Date.now();
  const removed: string[] = [];
  for (const name of readdirSync(root)) {
    const createdAt = workspaceCreatedAt(name);
    if (createdAt === null || now - createdAt <= options.olderThanMs) continue;
    rmSync(path.join(root, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}
