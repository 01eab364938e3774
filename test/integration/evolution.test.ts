/**
 * Directional Harness Evolution on the embedded default, end to end: the
 * workflow evolveHarnessPool on a real Temporal dev server, workers in their
 * own processes, the SIMULATED cluster as executor policy and (behind a
 * counting proxy) as the `sim-proposer`. The worker is killed with SIGKILL
 * while candidates are being validated; a new worker finishes the evolution,
 * and the store's records equal what the evolution planned: nothing lost,
 * nothing repeated, no proposer asked twice. A run then trains with the
 * frozen pool by its hash and records it.
 */
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import os from 'node:os';
import path from 'node:path';
import { rootCauseMessage } from '../../cli/runs';
import { readFrozenPool } from '../../core/harness/frozen-pool';
import { evolveHarnessPool, harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import type { EvolutionResult } from '../../workflows/evolve-harness-pool';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { startFaultProxy, type FaultProxy } from './fault-proxy';
import { startTestStack, uniqueRunId, type TestStack } from './stack';
import { killWorkerProcess, startWorkerProcess, stopAllWorkerProcesses, stopWorkerProcesses } from './worker-process';

jest.setTimeout(300_000);

const ROOT = path.resolve(__dirname, '..', '..');
const harnessS = (...args: string[]) =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', 'cli/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, TEMPORAL_ADDRESS: TEST_TEMPORAL_ADDRESS, DATABASE_URL: TEST_DATABASE_URL, LOG_LEVEL: 'warn' },
  });

const poolsDir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-pools-'));
let stack: TestStack;
let proposer: FaultProxy;
const workers: ChildProcess[] = [];

async function startWorker(): Promise<ChildProcess> {
  const worker = await startWorkerProcess(undefined, { HARNESS_S_POOLS_DIR: poolsDir });
  workers.push(worker);
  return worker;
}

beforeAll(async () => {
  stack = await startTestStack({ workers: false });
  proposer = await startFaultProxy(stack.sim.url);
});
afterAll(async () => {
  await stopWorkerProcesses(workers);
  await stopAllWorkerProcesses();
  await proposer?.close();
  await stack?.close();
});

/** The shipped example (examples/evolve-sim.json), pointed at this test's sim cluster and proposer proxy. */
function evolutionConfig(name: string) {
  const example = JSON.parse(readFileSync(path.join(ROOT, 'examples', 'evolve-sim.json'), 'utf8')).config;
  return {
    ...example,
    name,
    executor: { ...example.executor, baseUrl: `${stack.sim.url}/v1` },
    proposers: [{ baseUrl: `${proposer.url}/v1`, model: 'sim-proposer' }],
  };
}

async function waitForValidation(evolutionId: string): Promise<number> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const counts = await stack.store.evolutions.counts(evolutionId);
    if ((counts.rollouts.validate ?? 0) >= 8) return counts.rollouts.validate;
    if (Date.now() > deadline) throw new Error(`no validation rollouts within 2 minutes: ${JSON.stringify(counts)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('evolveHarnessPool on the sim', () => {
  let result: EvolutionResult;
  let evolutionId: string;

  test('a SIGKILL of the worker during validation loses and repeats nothing, and the pool has a sibling per direction that beats the base on its targets', async () => {
    evolutionId = uniqueRunId('evolve');
    const first = await startWorker();
    const handle = await stack.client.workflow.start(evolveHarnessPool, {
      workflowId: `evolve-${evolutionId}`,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: evolutionConfig(evolutionId) }],
    });
    await waitForValidation(evolutionId);
    const before = await stack.store.evolutions.counts(evolutionId);
    await killWorkerProcess(first);
    await startWorker();
    result = await handle.result();

    expect(before.rollouts.validate).toBeGreaterThan(0);
    expect(before.rollouts.effect ?? 0).toBe(0);
    const counts = await stack.store.evolutions.counts(evolutionId);
    // Every record exactly once: as many as the workflow planned, whatever ran twice.
    expect(counts.proposals).toBe(result.plan.proposals);
    expect(counts.candidates).toBe(result.plan.candidates);
    expect(counts.rollouts).toEqual(result.plan.rollouts);
    expect(counts.groups).toEqual(result.plan.groups);
    expect(counts.selections).toBe(evolutionConfig(evolutionId).rounds * 4);
    // No proposer was asked twice: one request per recorded attempt.
    expect(proposer.seen.filter((s) => s === 'POST /v1/chat/completions')).toHaveLength(counts.proposals);

    expect(result.simulated).toBe(true);
    expect(result.siblings.map((s) => s.direction).sort()).toEqual([
      'action_realization',
      'environment_contract',
      'procedural_skill',
      'trajectory_regulation',
    ]);
    // Above the base on fresh rollouts of its own targets, after it was chosen.
    for (const sibling of result.siblings) expect(sibling.targetRescueRate).toBeGreaterThan(sibling.baseRateOnTargets);
    // Rollouts are seeded and the SIMULATED proposer is a deterministic search: the same evolution every time.
    expect(result.effect.locality).toBe(true);
    expect(result.effect.complementarity.shown).toBe(true);
  });

  test('the frozen pool is in PostgreSQL and in a folder under its content hash, and it verifies', async () => {
    const stored = await stack.store.evolutions.getPool(result.pool);
    expect(stored?.evolutionId).toBe(evolutionId);
    expect(result.dir).toBe(path.join(poolsDir, result.pool));
    const frozen = readFrozenPool(result.dir, result.pool);
    expect(frozen.manifest.members.map((m) => m.id)).toEqual([result.base, ...result.siblings.map((s) => s.id)]);
    expect(frozen.manifest.effect).toEqual(result.effect);
    for (const sibling of result.siblings) {
      const member = frozen.manifest.members.find((m) => m.id === sibling.id)!;
      expect(member.bornRound).toBe(sibling.bornRound);
      expect(member.targets.length).toBeGreaterThan(0);
      expect(existsSync(path.join(result.dir, `${sibling.id}.json`))).toBe(true);
    }
  });

  test('starting the finished evolution again asks no proposer and runs no rollout, and gives the same pool', async () => {
    const asked = proposer.seen.length;
    const counts = await stack.store.evolutions.counts(evolutionId);
    const again = await stack.client.workflow.execute(evolveHarnessPool, {
      workflowId: `evolve-${evolutionId}-again`,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: evolutionConfig(evolutionId) }],
    });
    expect(again.pool).toBe(result.pool);
    expect(proposer.seen.length).toBe(asked);
    expect(await stack.store.evolutions.counts(evolutionId)).toEqual(counts);
  });

  test('the CLI evolves (resuming the finished evolution), shows and lists the pool', async () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'harness-s-evolve-')), 'evolve.json');
    writeFileSync(file, JSON.stringify(evolutionConfig(evolutionId)));
    const evolved = JSON.parse((await harnessS('pool', 'evolve', '--evolution', file, '--wait', '--json')).stdout);
    expect(evolved).toEqual({
      pool: result.pool,
      siblings: result.siblings.map((s) => ({
        id: s.id,
        direction: s.direction,
        targetRescueRate: s.targetRescueRate,
        baseRateOnTargets: s.baseRateOnTargets,
      })),
    });
    const shown = (await harnessS('pool', 'show', result.pool.slice(0, 8))).stdout;
    expect(shown).toContain(`pool ${result.pool} (sim, SIMULATED)`);
    expect(shown).toContain('lineage:');
    for (const s of result.siblings) expect(shown).toContain(`${s.id} *`);
    expect(shown).toMatch(/locality: (yes|no)/);
    expect(shown).toMatch(/complementarity: (yes|no)/);
    const listed = JSON.parse((await harnessS('pool', 'list', '--json')).stdout) as Array<{ pool: string; evolution: string }>;
    expect(listed).toContainEqual(expect.objectContaining({ pool: result.pool, evolution: evolutionId }));
  });

  test('a run trains with the frozen pool by its hash and records that hash', async () => {
    const runId = uniqueRunId('evolved-pool-run');
    const summary = await stack.client.workflow.execute(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: stack.config({ env: { kind: 'sim', pool: result.pool }, steps: 2, eval: { enabled: false } }) }],
    });
    expect(summary.stepsCompleted).toBe(2);
    expect((await stack.store.getRun(runId))?.poolHash).toBe(result.pool);
    const harnesses = new Set(
      (await stack.store.queryForTests('SELECT DISTINCT harness_id FROM trajectories WHERE run_id = $1', [runId])).rows.map(
        (r) => r.harness_id,
      ),
    );
    for (const h of harnesses) expect([result.base, ...result.siblings.map((s) => s.id)]).toContain(h);
  });

  test('another config under the same name is refused, naming the evolution', async () => {
    const failure = await stack.client.workflow
      .execute(evolveHarnessPool, {
        workflowId: `evolve-${evolutionId}-other`,
        taskQueue: TASK_QUEUES.control,
        args: [{ config: { ...evolutionConfig(evolutionId), seed: 99 } }],
      })
      .catch((err: unknown) => err);
    expect(rootCauseMessage(failure)).toContain(`an evolution named '${evolutionId}' is already stored with another config`);
  });
});
