/**
 * Sized folders (core/envs/sized-folder.ts): a loop-mounted ext4 image of a
 * fixed size. What is asserted is seen from the host: the errors the writer
 * gets, the blocks the image takes on the host's disk, the mount table and
 * the loop devices. Loop mounts need root: as another user these tests are
 * skipped (the folders are plain ones there, watched by polling).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { folderFull, imageOf, makeSizedFolder, mountsUnder } from '../../core/envs/sized-folder';
import { removeTree, sweepWorkspaces } from '../../core/envs/swe/workspace';
import { sweepAppWorldFolders } from '../../core/envs/appworld/state-folders';

const asRoot = process.getuid?.() === 0;
const rootTest = asRoot ? test : test.skip;
const MiB = 1024 ** 2;

/** Loop devices backed by a file under `dir`, as losetup lists them. */
const loopsUnder = (dir: string) =>
  execFileSync('losetup', ['--list', '--noheadings', '--raw', '--output', 'BACK-FILE'], { encoding: 'utf8' })
    .split('\n')
    .filter((f) => f.startsWith(`${dir}/`));

/** Runs a bash script as nobody (the sandbox user) in `cwd`; its output, stdout and stderr together. */
const asNobody = (cwd: string, script: string) =>
  spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--', 'bash', '-c', script], { cwd, encoding: 'utf8' });

const roots: string[] = [];
function scratch(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sized-folder-'));
  roots.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of roots) removeTree(dir, { loops: true });
});

describe('a sized folder', () => {
  rootTest(
    'stops files deleted but held open and a burst of fallocate at its size (ENOSPC); the host gives its image no more than that',
    async () => {
      const dir = scratch();
      const folder = path.join(dir, 'repo');
      expect(makeSizedFolder(folder, { bytes: 32 * MiB, entries: 1000 }, 65534)).toBe(true);
      expect(statSync(folder).uid).toBe(65534);
      // lost+found is not left for the sandbox to see.
      expect(execFileSync('ls', ['-A', folder], { encoding: 'utf8' })).toBe('');

      // 12 files of 8 MiB (96 MiB), each deleted while the shell keeps it open: never in any listing.
      const held = asNobody(
        folder,
        'for i in $(seq 3 14); do eval "exec $i>held$i"; rm held$i; head -c 8388608 /dev/zero >&$i || echo "held$i: refused"; done; ls -A | wc -l; df --output=avail -B1 . | tail -1',
      );
      expect(held.stderr).toMatch(/No space left on device/);
      expect(held.stdout).toMatch(/held1[0-4]: refused/);
      const image = imageOf(folder);
      expect(statSync(image).blocks * 512).toBeLessThanOrEqual(32 * MiB);

      // 40 files of 250 MiB (10 GB) allocated at once.
      const burst = asNobody(folder, 'for i in $(seq 1 40); do fallocate -l 250M burst$i 2>&1 || break; done; echo done');
      expect(burst.stdout).toMatch(/fallocate failed: No space left on device/);
      expect(await folderFull(folder)).toBe(true);
      expect(statSync(image).blocks * 512).toBeLessThanOrEqual(32 * MiB);

      expect(removeTree(dir)).toBe(true);
      expect(existsSync(dir)).toBe(false);
      expect(mountsUnder(dir)).toEqual([]);
      expect(loopsUnder(dir)).toEqual([]);
    },
  );

  rootTest('holds as many entries as its bound (and a few of its own), then refuses new ones', async () => {
    const dir = scratch();
    const folder = path.join(dir, 'out');
    makeSizedFolder(folder, { bytes: 16 * MiB, entries: 500 }, 65534);
    const out = asNobody(folder, 'for i in $(seq 1 1000); do : > f$i 2>/dev/null || { echo "refused at $i"; break; }; done');
    const at = Number(/refused at (\d+)/.exec(out.stdout)![1]);
    expect(at).toBeGreaterThan(500);
    expect(at).toBeLessThan(600);
    expect(await folderFull(folder)).toBe(true);
  });

  rootTest('is found in the mount table under a path with spaces, and removing its parent never follows into it', () => {
    const dir = scratch();
    const folder = path.join(dir, 'with space', 'repo');
    mkdirSync(path.dirname(folder));
    makeSizedFolder(folder, { bytes: 16 * MiB, entries: 100 });
    writeFileSync(path.join(folder, 'kept'), 'x');
    expect(mountsUnder(dir)).toEqual([folder]);
    expect(removeTree(path.join(dir, 'with space'))).toBe(true);
    expect(mountsUnder(dir)).toEqual([]);
    expect(loopsUnder(dir)).toEqual([]);
  });
});

describe('sweepers', () => {
  rootTest(
    "the SWE sweeper unmounts and removes a dead worker's old workspace, file system and image, and leaves a young one mounted",
    () => {
      const root = scratch();
      const old = path.join(root, `swe-${Date.now() - 7 * 3600_000}-abcd1234-x`);
      const young = path.join(root, `swe-${Date.now()}-abcd1234-y`);
      for (const dir of [old, young]) {
        mkdirSync(dir);
        makeSizedFolder(path.join(dir, 'repo'), { bytes: 16 * MiB, entries: 100 });
      }
      expect(sweepWorkspaces({ olderThanMs: 6 * 3600_000, root })).toEqual([path.basename(old)]);
      expect(existsSync(old)).toBe(false);
      expect(mountsUnder(old)).toEqual([]);
      expect(loopsUnder(old)).toEqual([]);
      expect(mountsUnder(young)).toEqual([path.join(young, 'repo')]);
    },
  );

  rootTest(
    "the AppWorld sweeper removes a dead worker's state folder with the output folders mounted in it, and keeps a running worker's",
    () => {
      const root = scratch();
      const stat = readFileSync('/proc/self/stat', 'utf8');
      const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
      // A process that has ended: its pid names no running process with that start time.
      const ended = spawnSync('true').pid!;
      const dead = path.join(root, `harness-s-appworld-${ended}.1-abc123`);
      const live = path.join(root, `harness-s-appworld-${process.pid}.${start}-def456`);
      for (const dir of [dead, live]) {
        mkdirSync(path.join(dir, 'episode-1'), { recursive: true });
        makeSizedFolder(path.join(dir, 'episode-1', 'outputs'), { bytes: 16 * MiB, entries: 100 });
      }
      mkdirSync(path.join(root, 'unrelated'));
      expect(sweepAppWorldFolders(root)).toEqual([path.basename(dead)]);
      expect(existsSync(dead)).toBe(false);
      expect(loopsUnder(dead)).toEqual([]);
      expect(mountsUnder(live)).toEqual([path.join(live, 'episode-1', 'outputs')]);
      expect(existsSync(path.join(root, 'unrelated'))).toBe(true);
    },
  );
});
