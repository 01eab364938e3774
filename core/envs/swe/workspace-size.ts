/**
 * A workspace's size as the sandbox sees it grow: disk use and entries,
 * counted by find (core/envs/swe/sandbox.ts reports a workspace over its
 * bound with them; a sized workspace is held at its bound by its file system).
 */
import { execFile, spawn } from 'node:child_process';

/** What a workspace may hold: disk use (blocks, so many small files count) and entries (files, folders, links). */
export interface WorkspaceBound {
  bytes: number;
  entries: number;
}

/**
 * A folder's disk use (blocks, so many small files count) and entries, as
 * find lists them (one process, not crossing into other file systems, not
 * following links; read as a stream, so a huge tree neither holds up the
 * worker nor fills its memory). `complete` is false when find could not read
 * all of it (a folder the sandbox user made unreadable, or one that went while
 * it read).
 */
export function measureTree(dir: string): Promise<WorkspaceBound & { complete: boolean }> {
  return new Promise((resolve) => {
    const find = spawn('find', [dir, '-xdev', '-printf', '%b\\n'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let blocks = 0;
    let entries = 0;
    let partial = '';
    find.stdout.setEncoding('utf8');
    find.stdout.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const line of lines) blocks += Number(line);
      entries += lines.length;
    });
    find.on('error', () => resolve({ bytes: Number.POSITIVE_INFINITY, entries: Number.POSITIVE_INFINITY, complete: false }));
    // %b counts 512-byte blocks.
    find.on('close', (code) => resolve({ bytes: blocks * 512, entries, complete: code === 0 }));
  });
}

export const overBound = (size: WorkspaceBound, bound: WorkspaceBound) => size.bytes > bound.bytes || size.entries > bound.entries;

/**
 * The workspace's size once its command has ended. A worker that is not root
 * runs its sandboxes as itself and cannot read what the command made
 * unreadable (chmod 000): it gives itself its rights back first, as it does to
 * remove the folder.
 */
export async function settledSize(dir: string): Promise<WorkspaceBound> {
  const size = await measureTree(dir);
  if (size.complete || process.getuid?.() === 0) return size;
  await new Promise((resolve) => execFile('chmod', ['-R', 'u+rwX', '--', dir], resolve));
  return measureTree(dir);
}
