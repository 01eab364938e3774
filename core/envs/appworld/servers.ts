/**
 * AppWorld environment servers, one process per concurrent episode: the
 * server holds one world at a time. Started on demand (up to `max`), reused
 * across episodes, restarted after any server error (an AppWorld server that
 * answered 500 may be wedged), killed with the worker (they get SIGKILL when
 * the process that started them dies) and by close().
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { pythonPrefix } from '../swe/trees';
import { sandboxKiller, systemMounts } from '../swe/sandbox';
import { AppWorldClient, AppWorldServerError } from './client';

export interface AppWorldServerSpec {
  /** The `appworld` command of the venv the package is installed in. */
  appworld: string;
  /** APPWORLD_ROOT: the folder holding data/ (tasks, base DBs, API docs). */
  root: string;
  /** APPWORLD_CACHE: where `appworld install` unpacked its bundles. */
  cache?: string;
  /** Servers at most (episodes at once). */
  max: number;
  /** Seconds a server may take to answer after it is started. */
  startSeconds?: number;
}

interface Server {
  process: ChildProcess;
  client: AppWorldClient;
  log: string[];
  /** Kills the server's sandbox (its init first). */
  kill: () => void;
}

/**
 * The server process: AppWorld's own environment server app (the FastAPI app
 * `appworld serve environment` runs), on 127.0.0.1 only (the CLI binds every
 * interface, and the server runs any code it is sent), inside bubblewrap:
 * its own PID namespace (it cannot see the worker or read its environment
 * through /proc), no capabilities, only /usr, the venv and its Python, the
 * package cache (read-only) and the AppWorld root (writable: its outputs) in
 * view. The network is shared, so the port can be reached (docs/appworld.md).
 */
function serverCommand(spec: AppWorldServerSpec, port: number): { file: string; args: string[] } {
  const venv = path.dirname(path.dirname(spec.appworld));
  const python = path.join(venv, 'bin', 'python');
  const prefix = pythonPrefix(venv);
  const launcher = [
    'import sys, uvicorn',
    'from appworld import update_root',
    'update_root(sys.argv[1])',
    'from appworld.serve.environment import app',
    "uvicorn.run(app, host='127.0.0.1', port=int(sys.argv[2]), log_level='warning')",
  ].join('\n');
  const binds = [...new Set([venv, ...(prefix ? [prefix] : []), ...(spec.cache ? [spec.cache] : [])])];
  const args = [
    '--info-fd', '3', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--die-with-parent', '--new-session',
    ...(process.getuid?.() === 0 ? ['--cap-drop', 'ALL'] : ['--unshare-user']),
    ...systemMounts(['/etc/ld.so.cache', '/etc/localtime', '/etc/ssl', '/etc/alternatives']),
  ];
  for (const dir of binds) args.push('--ro-bind', dir, dir);
  args.push('--bind', spec.root, spec.root, '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--chdir', spec.root);
  args.push('--', python, '-c', launcher, spec.root, String(port));
  return { file: 'bwrap', args };
}


export interface Lease {
  client: AppWorldClient;
  /** Gives the server back; `broken`: it answered an error, so it is stopped instead. */
  release(broken?: boolean): void;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

export class AppWorldServers {
  private readonly idle: Server[] = [];
  private readonly all = new Set<Server>();
  private readonly waiting: Array<(server: Server | null) => void> = [];
  private starting = 0;
  private closed = false;

  constructor(readonly spec: AppWorldServerSpec) {}

  async lease(signal?: AbortSignal): Promise<Lease> {
    const server = await this.take(signal);
    let released = false;
    return {
      client: server.client,
      release: (broken = false) => {
        if (released) return;
        released = true;
        if (broken || this.closed || server.process.exitCode !== null) this.stop(server);
        else this.give(server);
      },
    };
  }

  private async take(signal?: AbortSignal): Promise<Server> {
    signal?.throwIfAborted();
    if (this.closed) throw new AppWorldServerError('the AppWorld servers are closed');
    const ready = this.idle.pop();
    if (ready) return ready;
    if (this.all.size + this.starting < this.spec.max) {
      this.starting += 1;
      try {
        const server = await this.start();
        this.all.add(server);
        return server;
      } catch (err) {
        // A waiter may try a start of its own.
        this.waiting.shift()?.(null);
        throw err;
      } finally {
        this.starting -= 1;
      }
    }
    const server = await new Promise<Server | null>((resolve, reject) => {
      const waiter = (s: Server | null) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(s);
      };
      // An aborted waiter leaves the queue, so no server is handed to it and lost.
      const onAbort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal?.reason);
      };
      this.waiting.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    return server ?? this.take(signal);
  }

  private give(server: Server): void {
    const next = this.waiting.shift();
    if (next) next(server);
    else this.idle.push(server);
  }

  private stop(server: Server): void {
    this.all.delete(server);
    const at = this.idle.indexOf(server);
    if (at >= 0) this.idle.splice(at, 1);
    server.kill();
    // A waiter may now start a server of its own.
    this.waiting.shift()?.(null);
  }

  private async start(): Promise<Server> {
    const port = await freePort();
    const { file, args } = serverCommand(this.spec, port);
    // fd 3: bubblewrap's info (the server's namespace init), so a kill can aim at it (see core/envs/swe/sandbox.ts).
    const child = spawn(file, args, {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      // Its whole environment: nothing of the worker's (no secret) reaches the code it runs.
      env: { PATH: `${path.dirname(this.spec.appworld)}:/usr/bin:/bin`, HOME: '/tmp', APPWORLD_ROOT: this.spec.root, ...(this.spec.cache ? { APPWORLD_CACHE: this.spec.cache } : {}) },
    });
    const log: string[] = [];
    const keep = (chunk: Buffer) => {
      log.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      log.splice(0, Math.max(0, log.length - 40));
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const server: Server = { process: child, client: new AppWorldClient(`http://127.0.0.1:${port}`), log, kill: sandboxKiller(child, false) };
    const deadline = Date.now() + (this.spec.startSeconds ?? 90) * 1000;
    let spawnError: Error | null = null;
    child.once('error', (err) => (spawnError = err));
    while (Date.now() < deadline) {
      if (spawnError) throw new AppWorldServerError(`cannot start the AppWorld server (${file}): ${(spawnError as Error).message}`);
      if (child.exitCode !== null) {
        throw new AppWorldServerError(`the AppWorld server (${this.spec.appworld}, root ${this.spec.root}) exited with code ${child.exitCode}:\n${log.slice(-15).join('\n')}`);
      }
      if (await server.client.alive()) return server;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    server.kill();
    throw new AppWorldServerError(`the AppWorld server on port ${port} did not answer within ${this.spec.startSeconds ?? 90} s:\n${log.slice(-15).join('\n')}`);
  }

  /** Servers running now. */
  get size(): number {
    return this.all.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const server of [...this.all]) this.stop(server);
    for (const waiter of this.waiting.splice(0)) waiter(null);
  }
}
