/**
 * The OpenEnv servers an env's episodes run on, and a session slot on one of
 * them per episode.
 *
 * Remote servers are given by URL, each with the sessions it takes at once.
 * A worker counts their sessions in the run store, for every host at once
 * (SharedSessionSlots over its session leases); a process without a run
 * store (the CLI's eval) counts its own (SessionSlots).
 *
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
import { SESSION_LEASE_MS, serverKey, type SessionLease, type SharedSessionLeases } from '../session-leases';
import { openEnvHealthy, OpenEnvError, type OpenEnvAddress } from './client';

/** Where an episode may open its session, and how to give the slot back (once the server has closed the session). */
export interface SessionSlot {
  address: OpenEnvAddress;
  /** Gives the slot back; a second call does nothing. */
  release(): Promise<void>;
}

/** Session slots an env's episodes take one each: counted in this process, or for every host. */
export interface SessionSlotSource {
  /** A slot on the least busy server with one free; waits while every server is full, until `signal` aborts. */
  acquire(signal?: AbortSignal): Promise<SessionSlot>;
  /** Gives back the slots still held (a worker shutting down); absent when there is nothing to give back. */
  close?(): Promise<void>;
}

interface Server {
  address: OpenEnvAddress;
  sessions: number;
  inUse: number;
}

/** Slots over servers counted in this process: an episode takes the least busy server with a free slot, or waits for one. */
export class SessionSlots implements SessionSlotSource {
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
          release: async () => {
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
    if (gone)
      throw new OpenEnvError(
        `the OpenEnv server ${spec.app} (from ${spec.appDir}) exited while starting (code ${child.exitCode}):\n${log.slice(-15).join('\n')}`,
      );
    if (await openEnvHealthy(server.address, 1000)) return server;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  server.stop();
  throw new OpenEnvError(
    `the OpenEnv server ${spec.app} (from ${spec.appDir}) did not answer its health check within ${spec.startSeconds ?? 60} s:\n${log.slice(-15).join('\n')}`,
  );
}

/** The first wait between two tries at a slot while every server is full, and the longest (it doubles from one to the other). */
const SHARED_POLL_FIRST_MS = 50;
const SHARED_POLL_MAX_MS = 2_000;

/**
 * Slots over remote servers counted for every host: each slot is a lease in
 * the run store (core/envs/session-leases.ts), renewed while its episode
 * runs (every third of the lease) and released at its end. While every
 * server is full, an episode tries again after a wait that doubles up to
 * 2 s; a slot given back in this process wakes one waiting episode at once.
 */
export class SharedSessionSlots implements SessionSlotSource {
  private readonly addresses: Map<string, OpenEnvAddress>;
  private readonly servers: Array<{ server: string; sessions: number }>;
  private readonly leaseMs: number;
  /** Releases of the leases held now, for `close`. */
  private readonly held = new Set<() => Promise<void>>();
  /** Wakes of the episodes waiting now. */
  private readonly waiting = new Set<() => void>();

  constructor(
    servers: ReadonlyArray<{ url: string; sessions: number }>,
    private readonly shared: SharedSessionLeases,
  ) {
    this.addresses = new Map(servers.map((s) => [serverKey(s.url), { url: s.url }]));
    // One server written twice counts once, with the larger number of sessions.
    const sessions = new Map<string, number>();
    for (const s of servers) sessions.set(serverKey(s.url), Math.max(s.sessions, sessions.get(serverKey(s.url)) ?? 0));
    this.servers = [...sessions].map(([server, n]) => ({ server, sessions: n }));
    this.leaseMs = shared.leaseMs ?? SESSION_LEASE_MS;
  }

  async acquire(signal?: AbortSignal): Promise<SessionSlot> {
    let wait = SHARED_POLL_FIRST_MS;
    for (;;) {
      signal?.throwIfAborted();
      const lease = await this.shared.leases.take(this.servers, this.shared.holder, this.leaseMs);
      if (lease) {
        const slot = this.hold(lease);
        if (signal?.aborted) await slot.release();
        signal?.throwIfAborted();
        return slot;
      }
      await this.pause(wait * (0.5 + Math.random() / 2), signal);
      wait = Math.min(wait * 2, SHARED_POLL_MAX_MS);
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.held].map((release) => release()));
  }

  private hold(lease: SessionLease): SessionSlot {
    const { leases } = this.shared;
    let released = false;
    const renewal = setInterval(() => {
      // A renewal the store misses is tried again at the next tick; a lease taken by another holder is not renewed again.
      void leases.renew(lease, this.leaseMs).then(
        (ours) => {
          if (!ours) clearInterval(renewal);
        },
        () => undefined,
      );
    }, this.leaseMs / 3);
    renewal.unref();
    const release = async () => {
      if (released) return;
      released = true;
      clearInterval(renewal);
      this.held.delete(release);
      // A release the store misses frees the slot when its lease expires.
      await leases.release(lease).catch(() => undefined);
      this.waiting.values().next().value?.();
    };
    this.held.add(release);
    return { address: this.addresses.get(lease.server)!, release };
  }

  /** Waits `ms`, or less when a slot is given back here or `signal` aborts. */
  private pause(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.waiting.delete(wake);
        signal?.removeEventListener('abort', wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.waiting.add(wake);
      signal?.addEventListener('abort', wake, { once: true });
    });
  }
}

/** Slots over remote servers: leases in the run store shared by every host when `shared` is given, else counted in this process. */
export function remoteSlots(servers: ReadonlyArray<{ url: string; sessions: number }>, shared?: SharedSessionLeases): SessionSlotSource {
  if (shared) return new SharedSessionSlots(servers, shared);
  return new SessionSlots(servers.map((s) => ({ address: { url: s.url }, sessions: s.sessions, inUse: 0 })));
}

/** Slots over local servers started once (the first caller starts them; a failed start is tried again by the next). */
export class LocalServers implements SessionSlotSource {
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
    const servers = await started.then(
      (s) => s.servers,
      () => [],
    );
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
