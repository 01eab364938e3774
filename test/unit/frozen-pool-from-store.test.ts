/**
 * A host that lacks a frozen pool's folder writes it from the run store
 * (core/harness/frozen-pool.ts ensureFrozenPoolFolder). The run store is a
 * map here; test/integration/frozen-pool-store.test.ts runs it on PostgreSQL.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  contentHash,
  ensureFrozenPoolFolder,
  FrozenPoolError,
  poolHash,
  readFrozenPool,
  type PoolManifest,
} from '../../core/harness/frozen-pool';
import { loadSimWorld, type SimHarness } from '../../core/envs/sim/world';

function simPool(harnesses: SimHarness[]): { manifest: PoolManifest; specs: Record<string, unknown> } {
  const members = harnesses.map((h) => ({
    id: h.id,
    parent: h.parent,
    direction: h.direction,
    version: contentHash(h),
    file: `${h.id}.json`,
    targets: [],
    bornRound: 0,
    measured: null,
  }));
  return {
    manifest: { hash: poolHash('sim', members), env: 'sim', evolution: null, createdAt: '2025-01-01T00:00:00.000Z', members, effect: null },
    specs: Object.fromEntries(harnesses.map((h) => [h.id, h])),
  };
}

const world = loadSimWorld();
const pool = simPool(world.harnesses.slice(0, 3));
const hash = pool.manifest.hash;
let root: string;
let asked: string[];
const storeOf = (pools: Record<string, { manifest: unknown; specs: Record<string, unknown> }>) => ({
  getPool: async (h: string) => {
    asked.push(h);
    return pools[h] ?? null;
  },
});

beforeEach(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'harness-s-pools-store-'));
  asked = [];
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

test('a pool this host lacks is written from the run store under its hash, and reads back verified', async () => {
  const dir = await ensureFrozenPoolFolder(path.join(root, 'pools'), hash, storeOf({ [hash]: pool }));
  expect(dir).toBe(path.join(root, 'pools', hash));
  expect(readdirSync(path.join(root, 'pools'))).toEqual([hash]); // no staging folder left behind
  const read = readFrozenPool(dir, hash);
  expect(read.manifest).toEqual(pool.manifest);
  expect(read.specs).toEqual(pool.specs);
});

test('a pool folder already on this host is used as it is, without asking the run store', async () => {
  const store = storeOf({ [hash]: pool });
  await ensureFrozenPoolFolder(root, hash, store);
  asked = [];
  expect(await ensureFrozenPoolFolder(root, hash, store)).toBe(path.join(root, hash));
  expect(asked).toEqual([]);
});

test('a pool in neither place is refused, naming the folder it looked in and the run store', async () => {
  const missing = '0123456789abcdef';
  await expect(ensureFrozenPoolFolder(root, missing, storeOf({}))).rejects.toThrow(FrozenPoolError);
  await expect(ensureFrozenPoolFolder(root, missing, storeOf({}))).rejects.toThrow(
    `no frozen pool ${missing}: it is neither in this host's pools folder (${path.join(root, missing)}; $HARNESS_S_POOLS_DIR sets the folder, now ${root}) nor in the run store (harness_pools`,
  );
  expect(existsSync(path.join(root, missing))).toBe(false);
});

test('a stored pool whose specs do not hash to its manifest is refused and nothing is written', async () => {
  const tampered = {
    manifest: pool.manifest,
    specs: { ...pool.specs, [world.harnesses[1].id]: { ...world.harnesses[1], description: 'edited after freezing' } },
  };
  await expect(ensureFrozenPoolFolder(root, hash, storeOf({ [hash]: tampered }))).rejects.toThrow(
    new RegExp(
      `frozen pool ${hash} from the run store cannot be written to .*: cannot freeze pool ${hash}: member '${world.harnesses[1].id}' has version`,
    ),
  );
  expect(readdirSync(root)).toEqual([]);
});

test('a stored row under another hash than its manifest says is refused', async () => {
  const other = 'fedcba9876543210';
  await expect(ensureFrozenPoolFolder(root, other, storeOf({ [other]: pool }))).rejects.toThrow(
    `the run store keeps pool ${hash} under hash ${other}`,
  );
});

test('a folder under the hash that holds something else is not overwritten; reading it refuses it as usual', async () => {
  mkdirSync(path.join(root, hash));
  writeFileSync(path.join(root, hash, 'stray.json'), '{}');
  await ensureFrozenPoolFolder(root, hash, storeOf({ [hash]: pool }));
  expect(() => readFrozenPool(path.join(root, hash), hash)).toThrow(FrozenPoolError);
});
