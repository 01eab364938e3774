import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { filesNamedBy, parseRunConfig, type RunConfigInput } from '../../core/config';
import { createEnvironment } from '../../core/envs/registry';
import { DBBENCH_POOL_DIR } from '../../core/envs/dbbench/registration';
import { SimEnvironment } from '../../core/envs/sim/environment';
import { loadSimWorld } from '../../core/envs/sim/world';
import { CHARSET_POOL_DIR } from '../../core/envs/charset/environment';
import { contentHash, poolHash, poolHashOfHarnesses, writeFrozenPool, type PoolManifest } from '../../core/harness/frozen-pool';
import { loadHarnessPool, specFiles } from '../../core/harness/spec';
import type { RepairDirection } from '../../core/harness/direction';

interface AnySpec {
  id: string;
  parent: string | null;
  direction: RepairDirection;
}

/** Freezes these specs (base first) as a pool of `env` under $HARNESS_S_POOLS_DIR; returns its hash. */
function freeze(env: string, specs: AnySpec[]): string {
  const members = specs.map((spec) => ({
    id: spec.id,
    parent: spec.parent,
    direction: spec.direction,
    version: contentHash(spec),
    file: `${spec.id}.json`,
    targets: [],
    bornRound: 0,
    measured: null,
  }));
  const manifest: PoolManifest = {
    hash: poolHash(env, members),
    env,
    evolution: null,
    createdAt: new Date().toISOString(),
    members,
    effect: null,
  };
  writeFrozenPool(poolsDir, manifest, Object.fromEntries(specs.map((s) => [s.id, s])));
  return manifest.hash;
}

const envOf = (env: RunConfigInput['env']) => createEnvironment(parseRunConfig({ env }).env);
const world = loadSimWorld();
let poolsDir: string;
let scratch: string;

beforeEach(() => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'harness-s-env-registry-'));
  poolsDir = path.join(scratch, 'pools');
  process.env.HARNESS_S_POOLS_DIR = poolsDir;
});
afterEach(() => {
  delete process.env.HARNESS_S_POOLS_DIR;
  rmSync(scratch, { recursive: true, force: true });
});

test('a config names its frozen pool folder and its sim harness folder as files the worker reads', () => {
  const config = parseRunConfig({ env: { kind: 'sim', pool: '0123456789abcdef' } });
  expect(filesNamedBy(config)).toEqual([{ path: 'env.pool', file: path.join(poolsDir, '0123456789abcdef') }]);
  expect(filesNamedBy(parseRunConfig({ env: { kind: 'sim', harnessDir: 'my-harnesses' } }))).toEqual([
    { path: 'env.harnessDir', file: 'my-harnesses' },
  ]);
});

test("a sim run naming a frozen pool gets the frozen harnesses in place of the world file's, and records its hash", () => {
  const budget = world.harnesses.find((h) => h.id === 'tr-budget')!;
  const evolved = {
    ...budget,
    id: 'tr-budget-r1',
    parent: 'tr-budget',
    description: 'More turns, and plan first [SIMULATED].',
    hints: ['plan', 'verify'],
  };
  const hash = freeze('sim', [world.harnesses[0], budget, evolved]);
  const env = envOf({ kind: 'sim', pool: hash });
  expect(env).toBeInstanceOf(SimEnvironment);
  expect(env.harnesses().map((h) => h.id)).toEqual(['base', 'tr-budget', 'tr-budget-r1']);
  expect(env.harnesses()[2].systemPrompt({ taskId: 'lookup-000', kind: 'lookup' })).toMatch(/Hint: plan\nHint: verify/);
  expect(poolHashOfHarnesses(env.id, env.harnesses())).toBe(hash);
});

test('a frozen pool that is not there is refused, saying where it was looked for and what sets the folder', () => {
  expect(() => envOf({ kind: 'sim', pool: '0123456789abcdef' })).toThrow(
    `env.pool: no frozen pool 0123456789abcdef here: looked in ${path.join(poolsDir, '0123456789abcdef')} ($HARNESS_S_POOLS_DIR sets the folder`,
  );
});

test("another env's frozen pool is refused", () => {
  const hash = freeze('sim', [world.harnesses[0]]);
  expect(() => envOf({ kind: 'charset', pool: hash })).toThrow(`is a pool of env sim, not of charset`);
});

test("a sim harness folder replaces the world's harnesses, checked against the world", () => {
  const dir = path.join(scratch, 'sim-harnesses');
  mkdirSync(dir);
  writeFileSync(path.join(dir, 'base.json'), JSON.stringify(world.harnesses[0]));
  writeFileSync(
    path.join(dir, 'ps.json'),
    JSON.stringify({
      id: 'ps',
      parent: 'base',
      direction: 'procedural_skill',
      description: 'Plan, then compute.',
      hints: ['plan', 'compute'],
    }),
  );
  const env = envOf({ kind: 'sim', harnessDir: dir });
  expect(env.harnesses().map((h) => [h.id, h.version])).toEqual([
    ['base', contentHash(world.harnesses[0])],
    ['ps', expect.stringMatching(/^[0-9a-f]{12}$/)],
  ]);
});

test('a sim harness with an unknown behaviour is refused, naming its file and field', () => {
  const dir = path.join(scratch, 'sim-harnesses');
  mkdirSync(dir);
  writeFileSync(path.join(dir, 'base.json'), JSON.stringify(world.harnesses[0]));
  writeFileSync(
    path.join(dir, 'teleport.json'),
    JSON.stringify({ id: 'teleport', parent: 'base', direction: 'procedural_skill', description: 'x', hints: ['teleport'] }),
  );
  expect(() => envOf({ kind: 'sim', harnessDir: dir })).toThrow(
    `${path.join(dir, 'teleport.json')}: hints.0: unknown behaviour 'teleport'`,
  );
});

test('a sim harness folder without a base harness, or whose parent is missing, is refused', () => {
  const dir = path.join(scratch, 'sim-harnesses');
  mkdirSync(dir);
  writeFileSync(path.join(dir, 'ps.json'), JSON.stringify({ id: 'ps', parent: 'gone', direction: 'procedural_skill', description: 'x' }));
  expect(() => envOf({ kind: 'sim', harnessDir: dir })).toThrow(`${path.join(dir, 'ps.json')}: parent: unknown parent harness 'gone'`);
  expect(() => envOf({ kind: 'sim', harnessDir: dir })).toThrow(
    "a harness pool needs exactly one base harness (direction 'base'); found 0 (in ps.json)",
  );
});

test('a charset spec pool frozen as parsed loads through env.pool in place of the shipped one', () => {
  const [base, ...siblings] = loadHarnessPool(specFiles(CHARSET_POOL_DIR));
  const hash = freeze('charset', [base.spec, siblings[1].spec]);
  expect(
    envOf({ kind: 'charset', pool: hash })
      .harnesses()
      .map((h) => h.id),
  ).toEqual([base.spec.id, siblings[1].spec.id]);
});

test('a DBBench spec pool frozen as parsed loads through env.pool, base first, with its versions', async () => {
  const shipped = loadHarnessPool(specFiles(DBBENCH_POOL_DIR));
  const kept = [shipped[0], shipped[2]];
  const hash = freeze(
    'dbbench',
    kept.map((l) => l.spec),
  );
  // Building the env opens no connection: MySQL is only reached when an episode starts.
  const env = envOf({ kind: 'dbbench', data: path.resolve(__dirname, '../../data/dbbench/dev.jsonl'), pool: hash });
  try {
    expect(env.harnesses().map((h) => [h.id, h.version])).toEqual(kept.map((l) => [l.spec.id, l.version]));
    expect(poolHashOfHarnesses(env.id, env.harnesses())).toBe(hash);
  } finally {
    await env.close?.();
  }
});

test('a spec frozen as written rather than as parsed is refused: its env would read it as another version', () => {
  const [base] = loadHarnessPool(specFiles(CHARSET_POOL_DIR));
  const written = { id: 'base', parent: null, direction: 'base' as const, description: base.spec.description, env: 'charset' };
  const hash = freeze('charset', [written]);
  expect(() => envOf({ kind: 'charset', pool: hash })).toThrow(
    /base\.json reads as version [0-9a-f]{12}, but was frozen as [0-9a-f]{12}: a pool must be frozen with each spec as its env parses it/,
  );
});
