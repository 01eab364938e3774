import { createHash } from 'node:crypto';
import fs, { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  contentHash,
  FrozenPoolError,
  POOL_MANIFEST_FILE,
  poolHash,
  poolHashOfHarnesses,
  readFrozenPool,
  writeFrozenPool,
  type PoolManifest,
} from '../../core/harness/frozen-pool';
import { specFiles, specVersion, loadHarnessPool } from '../../core/harness/spec';
import { loadSimWorld, readSimHarnessDir, type SimHarness } from '../../core/envs/sim/world';
import { SimEnvironment } from '../../core/envs/sim/environment';

/** A sim pool ready to freeze: its manifest and specs, as the evolution would hand them over. */
function simPool(
  harnesses: SimHarness[],
  createdAt = '2025-01-01T00:00:00.000Z',
): { manifest: PoolManifest; specs: Record<string, unknown> } {
  const members = harnesses.map((h) => ({
    id: h.id,
    parent: h.parent,
    direction: h.direction,
    version: contentHash(h),
    file: `${h.id}.json`,
    targets: h.direction === 'base' ? [] : ['lookup/wrong_answer'],
    bornRound: h.direction === 'base' ? 0 : 1,
    measured: null,
  }));
  return {
    manifest: { hash: poolHash('sim', members), env: 'sim', evolution: 'evo-test', createdAt, members, effect: null },
    specs: Object.fromEntries(harnesses.map((h) => [h.id, h])),
  };
}

const world = loadSimWorld();
const [base, formatRepair, schemaHint] = world.harnesses;
let root: string;

beforeEach(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'harness-s-pools-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

test('a frozen pool reads back as it was written, in a folder named by its hash, with no temporary folder left behind', () => {
  const { manifest, specs } = simPool([base, schemaHint]);
  const dir = writeFrozenPool(root, manifest, specs);
  expect(dir).toBe(path.join(root, manifest.hash));
  expect(readdirSync(root)).toEqual([manifest.hash]);
  expect(readdirSync(dir).sort()).toEqual(['base.json', 'ec-schema.json', POOL_MANIFEST_FILE]);
  expect(readFileSync(path.join(dir, 'ec-schema.json'), 'utf8')).toBe(`${JSON.stringify(schemaHint, null, 2)}\n`);
  const read = readFrozenPool(dir, manifest.hash);
  expect(read.manifest).toEqual(manifest);
  expect(read.specs).toEqual({ base, 'ec-schema': schemaHint });
});

test("a pool's hash is 16 hex characters of its env and (id, version) pairs, whatever their order", () => {
  const members = [
    { id: 'base', version: 'aaaaaaaaaaaa' },
    { id: 'ec', version: 'bbbbbbbbbbbb' },
  ];
  expect(poolHash('sim', members)).toMatch(/^[0-9a-f]{16}$/);
  expect(poolHash('sim', [...members].reverse())).toBe(poolHash('sim', members));
  expect(poolHash('charset', members)).not.toBe(poolHash('sim', members));
  expect(poolHash('sim', [members[0], { id: 'ec', version: 'cccccccccccc' }])).not.toBe(poolHash('sim', members));
});

test('freezing the same pool again leaves the first one as it is', () => {
  const first = simPool([base, formatRepair]);
  const dir = writeFrozenPool(root, first.manifest, first.specs);
  const again = simPool([base, formatRepair], '2030-06-01T00:00:00.000Z');
  expect(writeFrozenPool(root, again.manifest, again.specs)).toBe(dir);
  expect(readFrozenPool(dir).manifest.createdAt).toBe(first.manifest.createdAt);
  expect(readdirSync(root)).toEqual([first.manifest.hash]);
});

test('a concurrent writer that renamed the same pool into place first is fine: its pool is verified and kept', () => {
  const { manifest, specs } = simPool([base, schemaHint]);
  const renameFirst = fs.renameSync;
  const rename = jest.spyOn(fs, 'renameSync').mockImplementationOnce((from, to) => {
    renameFirst(from, to);
    throw Object.assign(new Error(`ENOTEMPTY: directory not empty, rename '${String(from)}' -> '${String(to)}'`), { code: 'ENOTEMPTY' });
  });
  try {
    expect(writeFrozenPool(root, manifest, specs)).toBe(path.join(root, manifest.hash));
    expect(rename).toHaveBeenCalledTimes(1);
  } finally {
    rename.mockRestore();
  }
  expect(readdirSync(root)).toEqual([manifest.hash]);
  expect(readFrozenPool(path.join(root, manifest.hash)).manifest).toEqual(manifest);
});

test('a folder under the hash that holds another pool is refused, and so is a manifest whose hash is not its content', () => {
  const other = simPool([base, formatRepair]);
  const ours = simPool([base, schemaHint]);
  renameSync(writeFrozenPool(root, other.manifest, other.specs), path.join(root, ours.manifest.hash));
  expect(() => writeFrozenPool(root, ours.manifest, ours.specs)).toThrow(FrozenPoolError);
  expect(() => writeFrozenPool(root, ours.manifest, ours.specs)).toThrow(
    `${path.join(root, ours.manifest.hash)} already exists and holds something else`,
  );
  const lying = { ...ours.manifest, hash: other.manifest.hash };
  expect(() => writeFrozenPool(root, lying, ours.specs)).toThrow(
    `the manifest's hash is ${other.manifest.hash}, but its env and members hash to ${ours.manifest.hash}`,
  );
});

test('a member file edited after freezing is refused, naming the file and both hashes', () => {
  const { manifest, specs } = simPool([base, schemaHint]);
  const dir = writeFrozenPool(root, manifest, specs);
  const file = path.join(dir, 'ec-schema.json');
  const edited = { ...schemaHint, hints: ['verify'] };
  writeFileSync(file, JSON.stringify(edited));
  const version = manifest.members[1].version;
  expect(() => readFrozenPool(dir)).toThrow(
    `${file} was changed after the pool was frozen: its content hash is ${contentHash(edited)}, the manifest`,
  );
  expect(() => readFrozenPool(dir)).toThrow(`records ${version}`);
});

test('a member file removed after freezing is refused, naming the file', () => {
  const { manifest, specs } = simPool([base, schemaHint]);
  const dir = writeFrozenPool(root, manifest, specs);
  unlinkSync(path.join(dir, 'ec-schema.json'));
  expect(() => readFrozenPool(dir)).toThrow(`${path.join(dir, 'ec-schema.json')} was removed after the pool was frozen`);
});

test('a pool read under another hash, or from a folder under another name, is refused with both hashes', () => {
  const { manifest, specs } = simPool([base, schemaHint]);
  const dir = writeFrozenPool(root, manifest, specs);
  expect(() => readFrozenPool(dir, '0123456789abcdef')).toThrow(
    `pool 0123456789abcdef was asked for, but ${path.join(dir, POOL_MANIFEST_FILE)} holds pool ${manifest.hash}`,
  );
  const moved = path.join(root, 'fedcba9876543210');
  renameSync(dir, moved);
  expect(() => readFrozenPool(moved)).toThrow(
    `the folder is named fedcba9876543210, but ${path.join(moved, POOL_MANIFEST_FILE)} holds pool ${manifest.hash}`,
  );
});

test('spec folder loaders do not take the manifest for a harness', () => {
  const { manifest, specs } = simPool([base, schemaHint]);
  const dir = writeFrozenPool(root, manifest, specs);
  expect(specFiles(dir).map((f) => path.basename(f))).toEqual(['base.json', 'ec-schema.json']);
  expect(readSimHarnessDir(dir).map((h) => path.basename(h.file))).toEqual(['base.json', 'ec-schema.json']);
});

test('a content hash is 12 hex characters of sha256 over JSON with object keys sorted and arrays kept', () => {
  const sha = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 12);
  expect(contentHash({ b: 1, a: [2, { d: 3, c: 4 }] })).toBe(sha('{"a":[2,{"c":4,"d":3}],"b":1}'));
  expect(contentHash([2, 1])).not.toBe(contentHash([1, 2]));
});

test("a harness spec's version is the content hash of the spec as parsed", () => {
  const pool = loadHarnessPool(specFiles(path.resolve(__dirname, '../../core/envs/dbbench/harnesses')));
  for (const { spec, version } of pool) {
    expect(specVersion(spec)).toBe(contentHash(spec));
    expect(version).toBe(contentHash(spec));
  }
});

test('every sim harness has a content-hash version, and an env pool hashes like its frozen pool', () => {
  const env = new SimEnvironment(world);
  const harnesses = env.harnesses();
  expect(harnesses.every((h) => h.version === contentHash(world.harnesses.find((w) => w.id === h.id)))).toBe(true);
  expect(poolHashOfHarnesses('sim', harnesses)).toBe(simPool(world.harnesses).manifest.hash);
  expect(() => poolHashOfHarnesses('sim', [{ id: 'base' }])).toThrow('without a version');
});
