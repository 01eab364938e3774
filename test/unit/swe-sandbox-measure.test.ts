import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { measureTree } from '../../core/envs/swe/workspace-size';

describe("a workspace's measure", () => {
  test('counts every entry and the disk blocks they use, as du does', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'swe-measure-'));
    mkdirSync(path.join(dir, 'sub'));
    for (const name of ['a', 'b', 'sub/c']) writeFileSync(path.join(dir, name), Buffer.alloc(8192, 1));
    for (let i = 0; i < 100; i++) writeFileSync(path.join(dir, 'sub', `empty-${i}`), '');
    const size = await measureTree(dir);
    expect(size).toEqual({
      entries: 105,
      bytes: Number(execFileSync('du', ['-s', '--block-size=1', dir], { encoding: 'utf8' }).split('\t')[0]),
      complete: true,
    });
    expect(size.bytes).toBeGreaterThanOrEqual(3 * 8192);
  });

  test('a folder that is not there is reported as not measured (complete: false)', async () => {
    const size = await measureTree(path.join(os.tmpdir(), 'swe-measure-none', 'nowhere'));
    expect(size.complete).toBe(false);
  });
});
