/**
 * AppWorld's processes, one sandbox each (sandbox.ts, docs/appworld.md):
 *
 * - an execution server per episode, never reused: a clean interpreter
 *   every time. It runs the agent's code and sees the task's specs and
 *   starting databases, copied into its own folder when the episode starts,
 *   never a ground truth; it writes only its own output folder, and the
 *   worker speaks to it through a unix socket (it has no network). Servers
 *   are started ahead (one spare per episode slot), their imports done, so
 *   an episode waits for its server's start only when it outruns the spares.
 * - an evaluator per episode (one also started ahead), which sees the ground
 *   truth and a copy of the world the episode saved, taken once the episode's
 *   server is gone (regular files only), and never runs the agent's code.
 *
 * Everything is killed with the worker (--die-with-parent) and by close().
 * An episode's output folder, the one folder its code can write, is a file
 * system of `limits.outputsBytes` when the worker is root (sized-folder.ts):
 * writes past it fail with ENOSPC. What a dead worker left (its folders, the
 * file systems mounted in them) is swept by the next worker on the host.
 */
import { chmodSync, chownSync, copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeSizedFolder } from '../sized-folder';
import { asRoot } from '../swe/sandbox';
import { removeTree } from '../swe/workspace';
import { AppWorldClient, AppWorldServerError, EvaluateOutput, parseOutput } from './client';
import { DEFAULT_APPWORLD_LIMITS, nextSandboxUid, SANDBOX_ROOT, type AppWorldLimits } from './sandbox';
import { startSandbox, waitReady, type Sandbox } from './sandbox-process';
import { stateFolderPrefix, sweepAppWorldFolders } from './state-folders';

export interface AppWorldServerSpec {
  /** The `appworld` command of the venv the package is installed in. */
  appworld: string;
  /** APPWORLD_ROOT: the folder holding data/ (tasks, base DBs, API docs). */
  root: string;
  /** APPWORLD_CACHE of that install (the servers do not need it). */
  cache?: string;
  /** Episodes at once. */
  max: number;
  /** Seconds a server or evaluator may take to be ready after it is started. */
  startSeconds?: number;
  /** Seconds an evaluation may take. */
  evaluateSeconds?: number;
  limits?: Partial<AppWorldLimits>;
}

const SERVER_CODE = readFileSync(path.join(__dirname, 'sandboxed', 'execution_server.py'), 'utf8');
const EVALUATOR_CODE = readFileSync(path.join(__dirname, 'sandboxed', 'evaluate_task.py'), 'utf8');
/** The socket's folder inside the server's sandbox. */
export const SOCKET_DIR = '/run/appworld';
/** Files of a saved world copied for the evaluator at most (AppWorld saves one per app). */
const SAVED_FILES = 200;
/** Bytes of a saved world copied out for grading, at most (a world beyond it is not graded: reward 0). */
const SAVED_BYTES = 256 * 1024 ** 2;

/** The evaluator ran on the world the agent's code saved and could not grade it: that world is the agent's doing, so it scores 0. */
export class AppWorldUngradableError extends AppWorldServerError {
  override name = 'AppWorldUngradableError';
}

/** Whether every folder from `root` down to `root/relative` is a real folder, none a link the sandbox could have planted. */
function realFolders(root: string, relative: string): boolean {
  let at = root;
  for (const part of relative.split('/')) {
    at = path.join(at, part);
    try {
      if (!lstatSync(at).isDirectory()) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/** A folder only `uid` (the sandbox's) may use; the worker's own when it is not root. */
function folderFor(dir: string, uid: number | null): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (uid !== null) chownSync(dir, uid, uid);
  return dir;
}

/** Entries an episode's output folder may hold: AppWorld saves one database per app, and a few logs. */
const OUTPUTS_ENTRIES = 10_000;

/** An episode's output folder, only `uid`'s: a file system of `bytes` when the worker can mount one, a plain folder otherwise. */
function outputsFolder(dir: string, bytes: number, uid: number | null): string {
  makeSizedFolder(dir, { bytes, entries: OUTPUTS_ENTRIES }, uid ?? undefined);
  chmodSync(dir, 0o700);
  if (uid !== null) chownSync(dir, uid, uid);
  return dir;
}

interface Server {
  sandbox: Sandbox;
  id: string;
  dir: string;
  client: AppWorldClient;
}

export interface Lease {
  client: AppWorldClient;
  /** The experiment name the server writes the episode's outputs under. */
  experiment: string;
  /** The uid the server's sandbox runs as (null when the worker is not root and the sandbox runs as the worker). */
  uid: number | null;
  limits: AppWorldLimits;
  /** Stops the server (what the agent did is saved), then grades the saved world in an evaluator. */
  evaluate(signal?: AbortSignal): Promise<EvaluateOutput>;
  /** Stops the server and removes its folders. */
  release(): void;
  /** Whether the server's sandbox ran out of memory (all its processes together); it was killed then. */
  memoryLimitReached(): boolean;
  /** The most memory the server's sandbox held at once (its cgroup's count); null without a cgroup. */
  peakMemoryBytes(): number | null;
}

/** Waiters for a free episode slot. */
class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly max: number) {}
  async take(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.used < this.max) {
      this.used += 1;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const waiter = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal?.reason);
      };
      this.waiting.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.used -= 1;
  }
}

/** Whether this process has swept dead workers' state folders. */
let swept = false;

export class AppWorldServers {
  readonly limits: AppWorldLimits;
  private readonly venv: string;
  private state: string | null = null;
  private readonly slots: Slots;
  private readonly spareServers: Array<Promise<Server>> = [];
  private readonly spareEvaluators: Array<Promise<Sandbox>> = [];
  private readonly running = new Set<Sandbox>();
  private counter = 0;
  private closed = false;

  constructor(readonly spec: AppWorldServerSpec) {
    this.limits = { ...DEFAULT_APPWORLD_LIMITS, ...spec.limits };
    this.venv = path.dirname(path.dirname(spec.appworld));
    this.slots = new Slots(spec.max);
  }

  /** The worker's folder for its sandboxes' files: traversable, not listable, by the sandboxes' uids. Named for this process, for the sweeper. */
  private stateDir(): string {
    if (!this.state) {
      // What workers that died left is removed first, once per process.
      if (!swept) {
        swept = true;
        sweepAppWorldFolders();
      }
      this.state = mkdtempSync(path.join(os.tmpdir(), stateFolderPrefix()));
      chmodSync(this.state, 0o711);
      mkdirSync(path.join(this.state, 'eval'), { mode: 0o755 });
    }
    return this.state;
  }

  private track(sandbox: Sandbox): Sandbox {
    this.running.add(sandbox);
    void sandbox.exited.then(() => this.running.delete(sandbox));
    return sandbox;
  }

  private async startServer(): Promise<Server> {
    const id = `episode-${process.pid}-${++this.counter}`;
    const uid = nextSandboxUid();
    const owner = asRoot() ? uid : null;
    const dir = path.join(this.stateDir(), id);
    mkdirSync(path.join(dir, 'tasks'), { recursive: true, mode: 0o755 });
    const outputs = outputsFolder(path.join(dir, 'outputs'), this.limits.outputsBytes, owner);
    const run = folderFor(path.join(dir, 'run'), owner);
    const data = path.join(this.spec.root, 'data');
    // The task's files come later (lease); no ground truth is ever in view.
    const mounts = [
      { host: path.join(data, 'base_dbs'), at: `${SANDBOX_ROOT}/data/base_dbs` },
      { host: path.join(data, 'api_docs'), at: `${SANDBOX_ROOT}/data/api_docs` },
      { host: path.join(dir, 'tasks'), at: `${SANDBOX_ROOT}/data/tasks` },
      { host: outputs, at: `${SANDBOX_ROOT}/experiments/outputs/${id}`, writable: true },
      { host: run, at: SOCKET_DIR, writable: true },
    ];
    const sandbox = this.track(
      startSandbox(
        { venv: this.venv, mounts, limits: this.limits, code: SERVER_CODE, args: [SANDBOX_ROOT, `${SOCKET_DIR}/server.sock`] },
        uid,
      ),
    );
    const client = new AppWorldClient(path.join(run, 'server.sock'));
    try {
      await waitReady(
        sandbox,
        `the AppWorld server (${this.spec.appworld}, root ${this.spec.root})`,
        this.spec.startSeconds ?? 180,
        () => existsSync(client.socketPath) && client.alive(),
      );
      // The socket's folder goes back to root once the server listens, so model code cannot swap the socket for a
      // link to another episode's (the worker would send that episode this one's code).
      if (owner !== null) {
        chownSync(run, 0, 0);
        chmodSync(run, 0o755);
      }
      if (!lstatSync(client.socketPath).isSocket())
        throw new AppWorldServerError(`the AppWorld server's ${client.socketPath} is not a socket`);
    } catch (err) {
      sandbox.kill();
      removeTree(dir);
      throw err;
    }
    return { sandbox, id, dir, client };
  }

  private startEvaluator(): Promise<Sandbox> {
    const mounts = [
      { host: path.join(this.spec.root, 'data'), at: `${SANDBOX_ROOT}/data` },
      { host: path.join(this.stateDir(), 'eval'), at: `${SANDBOX_ROOT}/experiments/outputs` },
    ];
    const sandbox = this.track(
      startSandbox({ venv: this.venv, mounts, limits: this.limits, code: EVALUATOR_CODE, args: [SANDBOX_ROOT] }, nextSandboxUid()),
    );
    return waitReady(sandbox, 'the AppWorld evaluator', this.spec.startSeconds ?? 180, () => sandbox.log.includes('ready')).then(
      () => sandbox,
    );
  }

  /** A started one: a spare when there is one (and another is started in its place). */
  private take<T>(spares: Array<Promise<T>>, start: () => Promise<T>, count: number): Promise<T> {
    const next = spares.shift() ?? start();
    while (!this.closed && spares.length < count) {
      const spare = start();
      spare.catch(() => undefined);
      spares.push(spare);
    }
    return next;
  }

  /** A fresh server with `taskId`'s specs and databases in view, for one episode. */
  async lease(taskId: string, signal?: AbortSignal): Promise<Lease> {
    if (this.closed) throw new AppWorldServerError('the AppWorld servers are closed');
    await this.slots.take(signal);
    // The episode's evaluator is started now, so it is ready when the episode ends.
    if (this.spareEvaluators.length === 0) {
      const spare = this.startEvaluator();
      spare.catch(() => undefined);
      this.spareEvaluators.push(spare);
    }
    let server: Server | null = null;
    try {
      const from = path.join(this.spec.root, 'data', 'tasks', taskId);
      if (!existsSync(path.join(from, 'specs.json')))
        throw new AppWorldServerError(`AppWorld: no task '${taskId}' (no ${path.join(from, 'specs.json')})`);
      server = await this.take(this.spareServers, () => this.startServer(), this.spec.max);
      // A spare that died while it waited: one more, started now.
      if (server.sandbox.child.exitCode !== null) server = await this.startServer();
      if (this.closed) throw new AppWorldServerError('the AppWorld servers are closed');
      // The task's specs and starting databases only: its ground truth stays out of the server's view.
      const to = path.join(server.dir, 'tasks', taskId);
      mkdirSync(path.join(to, 'dbs'), { recursive: true, mode: 0o755 });
      copyFileSync(path.join(from, 'specs.json'), path.join(to, 'specs.json'));
      for (const file of readdirSync(path.join(from, 'dbs'))) copyFileSync(path.join(from, 'dbs', file), path.join(to, 'dbs', file));
    } catch (err) {
      if (server) this.discard(server);
      this.slots.give();
      throw err;
    }
    const leased = server;
    let released = false;
    const stop = () => leased.sandbox.kill();
    return {
      client: leased.client,
      experiment: leased.id,
      uid: leased.sandbox.uid,
      limits: this.limits,
      evaluate: async (evalSignal) => {
        stop();
        await leased.sandbox.exited;
        return this.evaluate(leased, taskId, evalSignal);
      },
      memoryLimitReached: () => leased.sandbox.memoryLimitReached(),
      peakMemoryBytes: () => leased.sandbox.peakMemoryBytes(),
      release: () => {
        if (released) return;
        released = true;
        this.discard(leased);
        this.slots.give();
      },
    };
  }

  /** Kills a server and removes its folders once it is gone. */
  private discard(server: Server): void {
    server.sandbox.kill();
    void server.sandbox.exited.then(() => removeTree(server.dir));
  }

  /** Copies the world the episode saved (regular files only: the sandbox wrote that folder) and grades it in an evaluator. */
  private async evaluate(server: Server, taskId: string, signal?: AbortSignal): Promise<EvaluateOutput> {
    const outputs = path.join(server.dir, 'outputs');
    const saved = path.join(outputs, 'tasks', taskId, 'dbs');
    const copy = path.join(this.stateDir(), 'eval', server.id);
    const dbs = path.join(copy, 'tasks', taskId, 'dbs');
    mkdirSync(dbs, { recursive: true, mode: 0o755 });
    try {
      // Every folder on the way must be a real one: a link planted by model code would have the worker copy another episode's world.
      const files = realFolders(outputs, `tasks/${taskId}/dbs`) ? readdirSync(saved).slice(0, SAVED_FILES) : [];
      let bytes = 0;
      for (const file of files) {
        const from = path.join(saved, file);
        const stat = lstatSync(from);
        if (!stat.isFile()) continue;
        bytes += stat.size;
        if (bytes > SAVED_BYTES)
          throw new AppWorldUngradableError(`the world the episode saved is over ${SAVED_BYTES / 1024 ** 2} MiB; it is not graded`);
        copyFileSync(from, path.join(dbs, file));
        chmodSync(path.join(dbs, file), 0o644);
      }
      const evaluator = await this.take(this.spareEvaluators, () => this.startEvaluator(), 1);
      return await this.runEvaluator(evaluator, taskId, server.id, signal);
    } finally {
      removeTree(copy);
    }
  }

  private async runEvaluator(evaluator: Sandbox, taskId: string, experiment: string, signal?: AbortSignal): Promise<EvaluateOutput> {
    const seconds = this.spec.evaluateSeconds ?? 120;
    const timer = setTimeout(() => evaluator.kill(), seconds * 1000);
    const onAbort = () => evaluator.kill();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      evaluator.child.stdin!.end(`${JSON.stringify({ task_id: taskId, experiment_name: experiment })}\n`);
      await evaluator.exited;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
    signal?.throwIfAborted();
    const lines = Buffer.concat(evaluator.stdout)
      .toString('utf8')
      .split('\n')
      .filter((l) => l.trim());
    if (evaluator.child.exitCode !== 0 || lines.length === 0) {
      throw new AppWorldUngradableError(
        `the AppWorld evaluator of ${taskId} could not grade the world the episode saved (exit ${evaluator.child.exitCode ?? evaluator.child.signalCode}):\n${evaluator.log.slice(-15).join('\n')}`,
      );
    }
    try {
      return parseOutput(`evaluator of ${taskId}`, `{"output": ${lines.at(-1)}}`, EvaluateOutput);
    } catch (err) {
      throw new AppWorldUngradableError(`the AppWorld evaluator of ${taskId} gave no readable result: ${(err as Error).message}`);
    }
  }

  /** Sandboxes running now and not being killed: servers (episodes' and spares) and evaluators. */
  get size(): number {
    return [...this.running].filter((s) => !s.killed).length;
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.running];
    for (const sandbox of all) sandbox.kill();
    await Promise.all(all.map((s) => s.exited));
    for (const spare of [...this.spareServers, ...this.spareEvaluators]) await spare.catch(() => undefined);
    if (this.state) removeTree(this.state);
  }
}
