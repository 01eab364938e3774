/**
 * The OpenEnv servers an env's episodes run on, and a session slot on one of
 * them per episode.
 *
 * Remote servers are given by URL, each with the sessions it takes at once.
 * Local servers are started by the worker, lazily, on the first episode:
 * uvicorn serving the app (the shipped keypad env, or a user's) from the
 * openenv venv (infra/openenv/install.ts), in the Python sandbox
 * (core/envs/python-sandbox.ts): no network, the app's folder read-only, a
 * unix socket in a folder of its own as the only way in.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chownSync, closeSync, mkdirSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { asRoot, sandboxKiller, seccompFile } from '../swe/sandbox';
import { nextSandboxUid, pythonSandboxArgv, SECCOMP_FD, type PythonSandboxLimits } from '../python-sandbox';
import { openEnvHealthy, OpenEnvError, type OpenEnvAddress } from './client';

/** Where an episode may open its session, and how to give the slot back. */
export interface SessionSlot {
  address: OpenEnvAddress;
  release(): void;
}

interface Server {
  address: OpenEnvAddress;
  sessions: number;
  inUse: number;
}

/** Slots over servers: an episode takes the least busy server with a free slot, or waits for one. */
export class SessionSlots {
  private readonly waiters: Array<() => void> = [];

  constructor(private readonly servers: Server[]) {}

  async acquire(signal?: AbortSignal): Promise<SessionSlot> {
    for (;;) {
      signal?.throwIfAborted();
      const free = this.servers.filter((s) => s.inUse < s.sessions).sort((a, b) => a.inUse / a.sessions - b.inUse / b.sessions)[0];
      if (free) {
        free.inUse += 1;
        let released = false;
        return {
          address: free.address,
          release: () => {
            if (released) return;
            released = true;
            free.inUse -= 1;
            this.waiters.shift()?.();
          },
        };
      }
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  }
}

export const DEFAULT_OPENENV_LIMITS: PythonSandboxLimits = {
  maxProcesses: 64,
  maxMemoryBytes: 4 * 1024 ** 3,
  maxFileBytes: 64 * 1024 ** 2,
  cpuSeconds: 3600,
  tmpBytes: 64 * 1024 ** 2,
};

/** Where the app's folder is seen inside the sandbox. */
const APP_ROOT = '/app';
/** Where the socket's folder is seen inside the sandbox. */
const SOCKET_DIR = '/run-openenv';

export interface LocalServerSpec {
  /** The openenv venv. */
  venv: string;
  /** The folder holding the app's module. */
  appDir: string;
  /** module:attribute, as uvicorn names it. */
  app: string;
  /** The server's max_concurrent_envs ($OPENENV_MAX_SESSIONS inside). */
  sessions: number;
  limits?: PythonSandboxLimits;
  /** Seconds to wait for the server to answer its health check. */
  startSeconds?: number;
}

/** A server the worker started in a sandbox: its socket, and how to stop it. */
export interface LocalServer {
  address: { socket: string };
  uid: number | null;
  /** The last lines it wrote. */
  log: string[];
  stop(): void;
  exited: Promise<void>;
}

const SERVE_CODE = [
  'import sys, uvicorn',
  `sys.path.insert(0, ${JSON.stringify(APP_ROOT)})`,
  "uvicorn.run(sys.argv[1], uds=sys.argv[2], log_level='warning')",
].join('\n');

/** Starts one server in the sandbox and waits until it answers its health check. */
export async function startLocalServer(spec: LocalServerSpec): Promise<LocalServer> {
  const uid = asRoot() ? nextSandboxUid() : null;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-openenv-'));
  if (uid !== null) chownSync(dir, uid, uid);
  const socket = path.join(dir, 'server.sock');
  const argv = pythonSandboxArgv({
    venv: spec.venv,
    mounts: [
      { host: spec.appDir, at: APP_ROOT },
      { host: dir, at: SOCKET_DIR, writable: true },
    ],
    limits: spec.limits ?? DEFAULT_OPENENV_LIMITS,
    uid: uid ?? 0,
    hostname: 'openenv',
    workdir: APP_ROOT,
    env: { OPENENV_MAX_SESSIONS: String(spec.sessions), ENABLE_WEB_INTERFACE: 'false' },
    code: SERVE_CODE,
    args: [spec.app, `${SOCKET_DIR}/server.sock`],
  });
  const filter = openSync(seccompFile(), 'r');
  let child: ChildProcess;
  try {
    // fd 3: bubblewrap's info (the sandbox's init), so a kill aims at it; fd SECCOMP_FD: the seccomp program.
    const stdio: Array<'pipe' | 'ignore' | number> = ['ignore', 'pipe', 'pipe', 'pipe'];
    stdio[SECCOMP_FD] = filter;
    child = spawn('bwrap', argv, { stdio, env: {} });
  } finally {
    closeSync(filter);
  }
  const log: string[] = [];
  const keep = (chunk: Buffer) => {
    log.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    log.splice(0, Math.max(0, log.length - 40));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let gone = false;
  const exited = new Promise<void>((resolve) => {
    child.once('close', () => {
      gone = true;
      resolve();
    });
    child.once('error', (err) => {
      log.push(`cannot start bwrap: ${err.message}`);
      gone = true;
      resolve();
    });
  });
  const kill = sandboxKiller(child, false);
  const server: LocalServer = {
    address: { socket },
    uid,
    log,
    exited,
    stop: () => {
      kill();
      void exited.then(() => rmSync(dir, { recursive: true, force: true }));
    },
  };
  const deadline = Date.now() + (spec.startSeconds ?? 60) * 1000;
  while (Date.now() < deadline) {
    if (gone) throw new OpenEnvError(`the OpenEnv server ${spec.app} (from ${spec.appDir}) exited while starting (code ${child.exitCode}):\n${log.slice(-15).join('\n')}`);
    if (await openEnvHealthy(server.address, 1000)) return server;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  server.stop();
  throw new OpenEnvError(`the OpenEnv server ${spec.app} (from ${spec.appDir}) did not answer its health check within ${spec.startSeconds ?? 60} s:\n${log.slice(-15).join('\n')}`);
}

/** Servers for remote URLs, as slots. */
export function remoteSlots(servers: ReadonlyArray<{ url: string; sessions: number }>): SessionSlots {
  return new SessionSlots(servers.map((s) => ({ address: { url: s.url }, sessions: s.sessions, inUse: 0 })));
}

/** Slots over local servers started once (the first caller starts them; a failed start is tried again by the next). */
export class LocalServers {
  private started: Promise<{ servers: LocalServer[]; slots: SessionSlots }> | null = null;

  constructor(
    private readonly spec: LocalServerSpec,
    private readonly instances: number,
  ) {}

  async acquire(signal?: AbortSignal): Promise<SessionSlot> {
    if (!this.started) {
      this.started = this.start();
      this.started.catch(() => (this.started = null));
    }
    const { slots } = await this.started;
    return slots.acquire(signal);
  }

  /** The servers running now (for tests and `close`). */
  async running(): Promise<LocalServer[]> {
    return this.started ? (await this.started).servers : [];
  }

  async close(): Promise<void> {
    const started = this.started;
    this.started = null;
    if (!started) return;
    const servers = await started.then((s) => s.servers, () => []);
    for (const server of servers) server.stop();
    await Promise.all(servers.map((s) => s.exited));
  }

  private async start(): Promise<{ servers: LocalServer[]; slots: SessionSlots }> {
    mkdirSync(os.tmpdir(), { recursive: true });
    const results = await Promise.allSettled(Array.from({ length: this.instances }, () => startLocalServer(this.spec)));
    const servers = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      for (const server of servers) server.stop();
      throw failed.reason;
    }
    return { servers, slots: new SessionSlots(servers.map((s) => ({ address: s.address, sessions: this.spec.sessions, inUse: 0 }))) };
  }
}
