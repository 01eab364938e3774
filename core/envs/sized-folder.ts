/**
 * Folders of a fixed size, for what a sandbox may write on the host's disk
 * (an SWE workspace, an AppWorld episode's output folder). When the worker is
 * root, the folder is a file system of its own: a sparse image file of the
 * bound's size (metadata included), formatted ext4 with as many inodes as the
 * bound has entries, loop-mounted nosuid,nodev on the folder. Writes past it
 * fail with ENOSPC however they are made (files deleted but held open, a burst
 * of fallocate), and the host's disk gives it at most the image's size, as it
 * is written. An image, not a tmpfs: a tmpfs of the same size would cost that
 * much memory once filled, an image costs disk only as it is written.
 *
 * Where the worker cannot mount (not root, no loop devices), the folder is a
 * plain one and the caller must watch its size (as sandbox.ts does by polling):
 * said once in the log and in `harness-s doctor`.
 *
 * Whatever removes a folder that may hold a sized one calls releaseMounts
 * first (workspace.ts removeTree does), and removes nothing while a mount is
 * left: no removal ever follows into a mount.
 */
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  ftruncateSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmdirSync,
  rmSync,
  statfsSync,
  unlinkSync,
} from 'node:fs';
import { statfs } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** What a folder may hold: disk use in bytes (its file system's size, metadata included) and entries (files, folders, links). */
export interface FolderBound {
  bytes: number;
  entries: number;
}

/** The image behind a sized folder: a file beside it, never inside what a sandbox sees. */
export const imageOf = (folder: string): string => `${folder}.img`;

/** ext4's own inodes (the root folder, the reserved ones) besides the entries the bound allows. */
const RESERVED_INODES = 16;
/** Below this (4 MiB), a sized folder's file system is too small for ext4's own metadata to leave room. */
const MIN_BYTES = 4 * 1024 ** 2;
/** A file system with less free than this (or no free inode) counts as full. */
const FULL_MARGIN_BYTES = 1024 * 1024;

/** Why sized folders cannot be made here (null while they can); learnt from the first that failed. */
let unavailable: string | null = null;

function fail(what: string, result: ReturnType<typeof spawnSync>): string {
  const why = result.error ? result.error.message : `${String(result.stderr ?? '').trim() || `exit ${result.status}`}`;
  return `${what}: ${why}`;
}

/**
 * Makes `folder` (which must not exist) a file system of `bound`'s size,
 * its root owned by `owner` (the worker's own uid when absent). Returns false,
 * having made it a plain folder, when the worker cannot mount file systems:
 * the first such failure is logged and ends the tries for this process.
 */
export function makeSizedFolder(folder: string, bound: FolderBound, owner?: number): boolean {
  if (unavailable === null && process.getuid?.() !== 0) unavailable = 'the worker is not root, so it cannot loop-mount a file system';
  if (unavailable === null) {
    const made = mountImage(folder, bound, owner);
    if (made === null) return true;
    unavailable = made;
    process.emitWarning(
      `${made}. Workspaces and AppWorld output folders are plain folders from now on: their size is watched by polling only (docs/swe.md)`,
      { code: 'HARNESS_S_UNSIZED_FOLDERS' },
    );
  }
  mkdirSync(folder, { mode: 0o755 });
  return false;
}

/** The image made, formatted and mounted on `folder`; null when done, else why not (nothing is left behind then). */
function mountImage(folder: string, bound: FolderBound, owner: number | undefined): string | null {
  const bytes = Math.max(MIN_BYTES, Math.ceil(bound.bytes / 4096) * 4096);
  const image = imageOf(folder);
  const fd = openSync(image, 'wx', 0o600);
  try {
    ftruncateSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
  const uid = owner ?? process.getuid!();
  const gid = owner ?? process.getgid!();
  // No journal and no room to grow (less metadata); inode tables left unwritten: a new sparse file already reads as zeros.
  const mkfs = spawnSync(
    'mkfs.ext4',
    [
      '-q',
      '-F',
      '-b',
      '4096',
      '-m',
      '0',
      '-O',
      '^has_journal,^resize_inode',
      '-N',
      String(bound.entries + RESERVED_INODES),
      '-E',
      `lazy_itable_init=1,nodiscard,root_owner=${uid}:${gid}`,
      image,
    ],
    { encoding: 'utf8' },
  );
  if (mkfs.error || mkfs.status !== 0) {
    unlinkSync(image);
    return fail(`cannot format a ${bytes}-byte image for ${folder} (mkfs.ext4, from e2fsprogs)`, mkfs);
  }
  mkdirSync(folder, { mode: 0o755 });
  const mount = spawnSync('mount', ['-t', 'ext4', '-o', 'loop,nosuid,nodev,noinit_itable', image, folder], { encoding: 'utf8' });
  if (mount.error || mount.status !== 0) {
    rmdirSync(folder);
    unlinkSync(image);
    return fail(`cannot loop-mount an image on ${folder}`, mount);
  }
  // lost+found would show in the sandbox's folder; e2fsck makes it again should it ever be needed.
  rmSync(path.join(folder, 'lost+found'), { recursive: true, force: true });
  return null;
}

/** Whether a sized folder's file system is full: less than 1 MiB free or no inode left (files deleted but held open count). */
export async function folderFull(folder: string): Promise<boolean> {
  try {
    const s = await statfs(folder);
    return s.bavail * s.bsize < FULL_MARGIN_BYTES || s.ffree === 0;
  } catch {
    return false;
  }
}

/** Mount points in this process's view, as /proc/self/mountinfo lists them (octal escapes undone); none where there is no /proc. */
function mountPoints(): string[] {
  let info: string;
  try {
    info = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  return info
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' ')[4].replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))));
}

/** The mount points at or under `dir`, deepest first. */
export function mountsUnder(dir: string): string[] {
  const root = path.resolve(dir);
  return mountPoints()
    .filter((p) => p === root || p.startsWith(`${root}/`))
    .sort((a, b) => b.split('/').length - a.split('/').length);
}

/**
 * Unmounts every file system mounted at or under `dir`, deepest first (lazily
 * when one is busy: it goes once nothing holds it). Their loop devices go with
 * them (mount's autoclear); `loops` also detaches any loop device still backed
 * by a file under `dir` (what a worker that died between attaching and
 * mounting would leave). True when no mount is left under `dir`.
 */
export function releaseMounts(dir: string, options: { loops?: boolean } = {}): boolean {
  for (const point of mountsUnder(dir)) {
    if (spawnSync('umount', [point], { stdio: 'ignore' }).status !== 0) spawnSync('umount', ['--lazy', point], { stdio: 'ignore' });
  }
  if (options.loops && process.getuid?.() === 0) {
    const list = spawnSync('losetup', ['--list', '--noheadings', '--raw', '--output', 'NAME,BACK-FILE'], { encoding: 'utf8' });
    const root = `${path.resolve(dir)}/`;
    for (const line of (list.stdout ?? '').split('\n')) {
      const [device, ...file] = line.trim().split(' ');
      if (device && file.join(' ').startsWith(root)) spawnSync('losetup', ['--detach', device], { stdio: 'ignore' });
    }
  }
  return mountsUnder(dir).length === 0;
}

export interface SizedFolderSupport {
  ok: boolean;
  detail: string;
  /** Seconds to make, mount, unmount and remove one small sized folder (when it worked). */
  seconds?: number;
}

/** Whether this process can make sized folders, tried on a small one in the system's temporary folder: for `harness-s doctor`. */
export function sizedFolderSupport(): SizedFolderSupport {
  if (unavailable !== null) return { ok: false, detail: unavailable };
  if (process.getuid?.() !== 0) return { ok: false, detail: 'the worker is not root, so it cannot loop-mount a file system' };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-sized-probe-'));
  const started = process.hrtime.bigint();
  try {
    const folder = path.join(dir, 'folder');
    const failed = mountImage(folder, { bytes: 16 * 1024 ** 2, entries: 64 }, undefined);
    if (failed) return { ok: false, detail: failed };
    const size = statfsSync(folder);
    if (!releaseMounts(dir)) return { ok: false, detail: `cannot unmount the probe's file system on ${folder}` };
    return {
      ok: true,
      detail: `loop-mounted ext4 images (a ${Math.round((size.blocks * size.bsize) / 1024 ** 2)} MiB probe)`,
      seconds: Number(process.hrtime.bigint() - started) / 1e9,
    };
  } finally {
    if (releaseMounts(dir)) rmSync(dir, { recursive: true, force: true });
  }
}
