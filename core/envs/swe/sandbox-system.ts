/**
 * What every bubblewrap sandbox here is made of, whoever starts it (SWE
 * commands, AppWorld's and OpenEnv's Python sandboxes): the unprivileged uid,
 * a minimal /etc, the compiled seccomp filter, and the read-only system.
 */
import { lstatSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { compileSeccomp } from './seccomp';
import { sweHome } from './trees';

/** The user commands run as when the worker is root (nobody). */
export const SANDBOX_UID = 65534;

let etcDir: string | null = null;

/** Written whole or not at all: another worker process may be reading the same file. */
function writeWhole(file: string, data: string | Buffer): void {
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, data, { mode: 0o644 });
  renameSync(partial, file);
}

/** A minimal /etc: who the users are (git and Python ask), nothing else of the host's. */
export function sandboxEtc(): string {
  if (etcDir) return etcDir;
  // Under the SWE home, not a shared /tmp: another user could plant a link there for a root worker to write through.
  const dir = path.join(sweHome(), 'sandbox-etc');
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  writeWhole(path.join(dir, 'passwd'), `root:x:0:0:root:/root:/bin/sh\nnobody:x:${SANDBOX_UID}:${SANDBOX_UID}:nobody:/workspace:/bin/sh\n`);
  writeWhole(path.join(dir, 'group'), `root:x:0:\nnogroup:x:${SANDBOX_UID}:\n`);
  writeWhole(path.join(dir, 'hosts'), '127.0.0.1 localhost sandbox\n');
  etcDir = dir;
  return dir;
}

let filterFile: string | null = null;

/**
 * The seccomp program (seccomp.ts) compiled for this machine, in a file
 * (compiled once per process). A bubblewrap command line with `--seccomp N`
 * gets it as fd N: `openSync(seccompFile(), 'r')` in the child's stdio[N].
 */
export function seccompFile(): string {
  if (filterFile) return filterFile;
  const file = path.join(sandboxEtc(), `seccomp-${process.arch}.bpf`);
  writeWhole(file, compileSeccomp());
  filterFile = file;
  return file;
}

/**
 * The options that keep a sandbox's user namespace its last one and load the
 * seccomp filter from `fd`: for any bubblewrap command line (0.8 or later).
 */
export function hardeningArgs(fd: number): string[] {
  return ['--unshare-user', '--disable-userns', '--seccomp', String(fd)];
}

export const asRoot = (): boolean => process.getuid?.() === 0;

export function pathExists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** The read-only system a bubblewrap sandbox here starts from: /usr, the top-level links into it, and the host /etc files named. */
export function systemMounts(etcFiles: readonly string[]): string[] {
  const args = ['--ro-bind', '/usr', '/usr'];
  for (const top of ['bin', 'lib', 'lib64', 'sbin']) {
    const host = `/${top}`;
    if (!pathExists(host)) continue;
    if (lstatSync(host).isSymbolicLink()) args.push('--symlink', `usr/${top}`, host);
    else args.push('--ro-bind', host, host);
  }
  for (const file of etcFiles) if (pathExists(file)) args.push('--ro-bind', file, file);
  return args;
}
