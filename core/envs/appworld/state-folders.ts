/**
 * Each AppWorld worker's state folder (its servers' episodes, their output
 * file systems) names its process, so the next worker on the host can remove
 * what a worker that died left behind.
 */
import { readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTimeOf } from '../process-start';
import { removeTree } from '../swe/workspace';

/** The start of every worker's state folder's name (in the system's temporary folder). */
const STATE_PREFIX = 'harness-s-appworld-';

/** A process as `<pid>.<start time>` (a pid alone may have been reused); null when it is not running, or there is no /proc. */
function processTag(pid: number): string | null {
  const start = startTimeOf(pid);
  return start === null ? null : `${pid}.${start}`;
}

/** This worker's state folder's name before mkdtemp's suffix: it names the worker's process. */
export function stateFolderPrefix(): string {
  return `${STATE_PREFIX}${processTag(process.pid) ?? `${process.pid}.0`}-`;
}

/**
 * Removes the state folders of workers that are gone (their episodes'
 * folders, the file systems mounted in them unmounted first): a worker's
 * folder names its process, so one still running keeps its own. Nothing is
 * swept where there is no /proc to tell. Returns the names removed.
 */
export function sweepAppWorldFolders(root = os.tmpdir()): string[] {
  if (processTag(process.pid) === null) return [];
  const removed: string[] = [];
  for (const name of readdirSync(root)) {
    const owner = new RegExp(`^${STATE_PREFIX}(\\d+)\\.(\\d+)-`).exec(name);
    if (!owner || processTag(Number(owner[1])) === `${owner[1]}.${owner[2]}`) continue;
    if (removeTree(path.join(root, name), { loops: true })) removed.push(name);
  }
  return removed;
}
