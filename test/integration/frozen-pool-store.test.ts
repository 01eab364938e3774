/**
 * Frozen harness pools are not tied to the host that froze them, on the
 * SIMULATED cluster: a pool kept only in the run store (harness_pools) is
 * written into a worker's pools folder ($HARNESS_S_POOLS_DIR) when its run
 * or `harness-s eval` needs it; a pool in neither place is refused, naming both.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { WorkflowFailedError } from '@temporalio/client';
import { rootCauseMessage } from '../../cli/runs';
import { loadSimWorld } from '../../core/envs/sim/world';
import { contentHash, poolHash, readFrozenPool, type PoolManifest } from '../../core/harness/frozen-pool';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const execFileAsync = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');
const world = loadSimWorld();

/** The sim world's own harnesses as a frozen pool (no evolution needed to make one). */
function simPool(): { manifest: PoolManifest; specs: Record<string, unknown> } {
  const members = world.harnesses.map((h) => ({
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
    manifest: { hash: poolHash('sim', members), env: 'sim', evolution: null, createdAt: new Date().toISOString(), members, effect: null },
    specs: Object.fromEntries(world.harnesses.map((h) => [h.id, h])),
  };
}

const MISSING_POOL = '0123456789abcdef';
const pool = simPool();
let stack: TestStack;
let workerPools: string;
const poolsDirBefore = process.env.HARNESS_S_POOLS_DIR;

beforeAll(async () => {
  // The in-process workers' pools folder: empty, as on a host that never froze a pool.
  workerPools = mkdtempSync(path.join(os.tmpdir(), 'harness-s-worker-pools-'));
  process.env.HARNESS_S_POOLS_DIR = workerPools;
  stack = await startTestStack();
  await stack.store.evolutions.savePool({
    poolHash: pool.manifest.hash,
    env: 'sim',
    evolutionId: null,
    manifest: pool.manifest,
    specs: pool.specs,
  });
  await stack.store.queryForTests('DELETE FROM harness_pools WHERE pool_hash = $1', [MISSING_POOL]);
});
afterAll(async () => {
  await stack?.close();
  if (poolsDirBefore === undefined) delete process.env.HARNESS_S_POOLS_DIR;
  else process.env.HARNESS_S_POOLS_DIR = poolsDirBefore;
});

function harnessS(args: string[], poolsDir: string) {
  const env = {
    ...process.env,
    TEMPORAL_ADDRESS: TEST_TEMPORAL_ADDRESS,
    DATABASE_URL: TEST_DATABASE_URL,
    HARNESS_S_POOLS_DIR: poolsDir,
    LOG_LEVEL: 'warn',
  };
  return execFileAsync(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['cli/main.ts', ...args], { cwd: ROOT, env });
}

test("a run naming a pool its worker's folder lacks trains with the pool from the run store, which is then in the folder", async () => {
  expect(readdirSync(workerPools)).toEqual([]);
  const runId = uniqueRunId('pool-from-store');
  const summary = await stack.client.workflow.execute(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ env: { kind: 'sim', pool: pool.manifest.hash }, steps: 2, eval: { enabled: false } }) }],
  });
  expect(summary.stepsCompleted).toBe(2);
  expect((await stack.store.getRun(runId))?.poolHash).toBe(pool.manifest.hash);
  const frozen = readFrozenPool(path.join(workerPools, pool.manifest.hash), pool.manifest.hash);
  expect(frozen.specs).toEqual(pool.specs);
  expect(readdirSync(workerPools)).toEqual([pool.manifest.hash]);
});

test('a run naming a pool in neither the folder nor the run store fails at once, naming both places', async () => {
  const runId = uniqueRunId('pool-nowhere');
  const failure = await stack.client.workflow
    .execute(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: stack.config({ env: { kind: 'sim', pool: MISSING_POOL } }) }],
    })
    .then(
      () => null,
      (err: unknown) => err,
    );
  expect(failure).toBeInstanceOf(WorkflowFailedError);
  expect(rootCauseMessage(failure)).toContain(
    `env.pool: no frozen pool ${MISSING_POOL}: it is neither in this host's pools folder (${path.join(workerPools, MISSING_POOL)}; $HARNESS_S_POOLS_DIR sets the folder, now ${workerPools}) nor in the run store (harness_pools`,
  );
  expect(existsSync(path.join(workerPools, MISSING_POOL))).toBe(false);
});

test('`harness-s eval` with a pool only the run store holds evaluates under its base harness, and refuses a pool in neither place', async () => {
  const cliPools = mkdtempSync(path.join(os.tmpdir(), 'harness-s-cli-pools-'));
  const evalArgs = (hash: string) => [
    'eval',
    '--env',
    'sim',
    '--env-config',
    JSON.stringify({ pool: hash }),
    '--harness',
    'base',
    '--base-url',
    `${stack.sim.url}/v1`,
    '--model',
    world.model.name,
    '--limit',
    '2',
    '--max-turns',
    '5',
    '--json',
  ];
  const { stdout } = await harnessS(evalArgs(pool.manifest.hash), cliPools);
  expect(JSON.parse(stdout)).toMatchObject({ harness: 'base', total: 2 });
  expect(readFrozenPool(path.join(cliPools, pool.manifest.hash), pool.manifest.hash).manifest.hash).toBe(pool.manifest.hash);

  const refused = await harnessS(evalArgs(MISSING_POOL), cliPools).then(
    () => null,
    (err: { code: number; stderr: string }) => err,
  );
  expect(refused?.code).toBe(2);
  expect(refused?.stderr).toContain(
    `env.pool: no frozen pool ${MISSING_POOL}: it is neither in this host's pools folder (${path.join(cliPools, MISSING_POOL)};`,
  );
  expect(refused?.stderr).toContain('nor in the run store (harness_pools');
}, 120_000);
