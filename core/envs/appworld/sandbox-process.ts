/**
 * A running AppWorld sandbox (bubblewrap with sandbox.ts's argv): its
 * process, the cgroup of its own that is watched for running out of memory,
 * the end of its output, how it is killed, and waiting until it is ready.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { SandboxCgroup } from '../sandbox-cgroup';
import { asRoot, seccompFile, sandboxKiller } from '../swe/sandbox';
import { AppWorldServerError } from './client';
import { appWorldSandboxArgv, SECCOMP_FD, type SandboxSpec } from './sandbox';

/** Bytes of an evaluator's output read at most. */
const EVALUATOR_OUTPUT_BYTES = 8 * 1024 * 1024;

/** A running sandbox: its process, uid, the end of its output, and how to kill it. */
export interface Sandbox {
  child: ChildProcess;
  uid: number | null;
  log: string[];
  /** Kills the whole sandbox (its init first). */
  kill: () => void;
  killed: boolean;
  /** Resolves when bubblewrap has exited (the sandbox is gone). */
  exited: Promise<void>;
  /** stdout, as it came (the evaluator's answer). */
  stdout: Buffer[];
  /** Whether the sandbox ran out of memory (its cgroup's limit, all its processes together); it is killed when it does. */
  memoryLimitReached: () => boolean;
  /** The most memory the sandbox's processes held at once, as its cgroup counted it (kept once it is gone); null without a cgroup. */
  peakMemoryBytes: () => number | null;
}

/** How often a running sandbox's cgroup is asked whether it ran out of memory (a small file read). */
const OOM_WATCH_INTERVAL_MS = 200;

export function startSandbox(spec: Omit<SandboxSpec, 'uid'>, uid: number): Sandbox {
  // The sandbox's own cgroup (null where there is none: then prlimit's per-process limits are all there is).
  const cgroup = SandboxCgroup.create({ memoryBytes: spec.limits.sandboxMemoryBytes, processes: spec.limits.maxProcesses });
  const [file, args] = cgroup
    ? cgroup.wrap(['bwrap', ...appWorldSandboxArgv({ ...spec, uid })])
    : ['bwrap', appWorldSandboxArgv({ ...spec, uid })];
  const filter = openSync(seccompFile(), 'r');
  let child: ChildProcess;
  try {
    // fd 3: bubblewrap's info (the sandbox's init), so a kill aims at it; fd SECCOMP_FD: the seccomp program.
    const stdio: Array<'pipe' | number> = ['pipe', 'pipe', 'pipe', 'pipe'];
    stdio[SECCOMP_FD] = filter;
    child = spawn(file, args, { stdio, env: {} });
  } catch (err) {
    void cgroup?.remove();
    throw err;
  } finally {
    closeSync(filter);
  }
  const log: string[] = [];
  const stdout: Buffer[] = [];
  let stdoutBytes = 0;
  const keep = (chunk: Buffer) => {
    log.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    log.splice(0, Math.max(0, log.length - 40));
  };
  child.stdout!.on('data', (chunk: Buffer) => {
    if (stdoutBytes < EVALUATOR_OUTPUT_BYTES) stdout.push(chunk);
    stdoutBytes += chunk.length;
    keep(chunk);
  });
  child.stderr!.on('data', keep);
  child.stdin!.on('error', () => undefined);
  // The kernel kills one process of a group out of memory; the rest of the sandbox is killed once the worker sees it.
  let outOfMemory = false;
  let peak: number | null = null;
  const killer = sandboxKiller(child, false);
  const oomWatch = cgroup
    ? setInterval(() => {
        if (!outOfMemory && cgroup.memoryLimitReached()) {
          outOfMemory = true;
          sandbox.kill();
        }
      }, OOM_WATCH_INTERVAL_MS)
    : undefined;
  // Once the sandbox is gone, what its group counted is kept and the group removed.
  const ended = async () => {
    clearInterval(oomWatch);
    if (cgroup?.memoryLimitReached()) outOfMemory = true;
    peak = cgroup?.peakMemoryBytes() ?? null;
    await cgroup?.remove();
  };
  const exited = new Promise<void>((resolve) => {
    child.once('close', () => void ended().then(resolve));
    child.once('error', (err) => {
      log.push(`cannot start bwrap: ${err.message}`);
      void ended().then(resolve);
    });
  });
  const sandbox: Sandbox = {
    child,
    uid: asRoot() ? uid : null,
    log,
    kill: () => {
      sandbox.killed = true;
      killer();
    },
    killed: false,
    exited,
    stdout,
    memoryLimitReached: () => outOfMemory || (cgroup?.memoryLimitReached() ?? false),
    peakMemoryBytes: () => peak ?? cgroup?.peakMemoryBytes() ?? null,
  };
  return sandbox;
}

/** Waits until `ready` holds, the sandbox exits (an error with its output) or `seconds` pass (it is killed). */
export async function waitReady(sandbox: Sandbox, what: string, seconds: number, ready: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  let gone = false;
  void sandbox.exited.then(() => (gone = true));
  while (Date.now() < deadline) {
    if (gone) throw new AppWorldServerError(`${what} exited (code ${sandbox.child.exitCode}):\n${sandbox.log.slice(-15).join('\n')}`);
    if (await ready()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  sandbox.kill();
  throw new AppWorldServerError(`${what} was not ready within ${seconds} s:\n${sandbox.log.slice(-15).join('\n')}`);
}
