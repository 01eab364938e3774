/**
 * `harness-s compare`: every arm runs on the same seeds, so on the same task
 * sample at every step and the same eval tasks; its figures are means over seeds.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { planCompare, runCompare } from '../../cli/compare';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { startTestStack, type TestStack } from './stack';

const ROOT = path.resolve(__dirname, '..', '..');
let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(async () => {
  await stack?.close();
});

async function sampleOf(runId: string, phase: 'train' | 'eval') {
  const { rows } = await stack.store.pool.query(
    `SELECT DISTINCT step, task_id FROM trajectories WHERE run_id = $1 AND phase = $2 AND role IN ('base', 'eval') ORDER BY step, task_id`,
    [runId, phase],
  );
  return rows.map((r) => `${r.step}/${r.task_id}`);
}

test('the arms of a seed train on identical task samples and evaluate on identical tasks; each arm changes only what it names', async () => {
  const plan = planCompare(stack.config({ steps: 2 }), ['policy-only', 'harness-s', 'random-k'], [5, 6]);
  const result = await runCompare({ client: stack.client, plan, parallel: 3, progress: () => undefined });

  for (const seed of ['5', '6']) {
    const [policyOnly, harnessS, randomK] = ['policy-only', 'harness-s', 'random-k'].map((arm) => result.runs[arm][seed].runId);
    const train = await sampleOf(policyOnly, 'train');
    expect(train).toHaveLength(2 * 4);
    expect(await sampleOf(harnessS, 'train')).toEqual(train);
    expect(await sampleOf(randomK, 'train')).toEqual(train);
    const evalTasks = await sampleOf(policyOnly, 'eval');
    expect(evalTasks.length).toBeGreaterThan(0);
    expect(await sampleOf(harnessS, 'eval')).toEqual(evalTasks);
    expect(await sampleOf(randomK, 'eval')).toEqual(evalTasks);
    expect(await stack.store.routingDecisions(policyOnly)).toEqual([]);
    expect((await stack.store.routingDecisions(randomK)).every((d) => d.strategy === 'random')).toBe(true);
    expect((await stack.store.routingDecisions(harnessS)).every((d) => d.strategy === 'validation')).toBe(true);
  }
  expect(result.runs['policy-only']['5']).toMatchObject({ extraRollouts: 0, rescueRate: 0 });
  // The arm's figure is the mean of its seeds' figures.
  const live = ['5', '6'].map((s) => result.runs['harness-s'][s].liveGroupFraction);
  expect(result.arms['harness-s'].liveGroupFraction).toBeCloseTo((live[0] + live[1]) / 2, 12);
});

test('`harness-s compare --json` prints each arm with its figures and the paired difference with its interval', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-compare-'));
  const file = path.join(dir, 'config.json');
  writeFileSync(file, JSON.stringify({ config: stack.config({ steps: 1 }) }));
  const { stdout } = await promisify(execFile)(
    path.join(ROOT, 'node_modules', '.bin', 'tsx'),
    ['cli/main.ts', 'compare', '--config', file, '--arms', 'policy-only,harness-s', '--seeds', '1', '--attach', '--json'],
    { cwd: ROOT, env: { ...process.env, TEMPORAL_ADDRESS: TEST_TEMPORAL_ADDRESS, DATABASE_URL: TEST_DATABASE_URL, LOG_LEVEL: 'warn' } },
  );
  const output = JSON.parse(stdout);
  expect(Object.keys(output.arms)).toEqual(['policy-only', 'harness-s']);
  for (const figures of Object.values(output.arms)) {
    expect(Object.keys(figures as object).sort()).toEqual(['baseSuccessEnd', 'baseSuccessEndStdErr', 'extraRollouts', 'liveGroupFraction', 'rank1SuccessEnd', 'rescueRate', 'trainingSeconds']);
  }
  expect(output.arms['policy-only'].extraRollouts).toBe(0);
  expect(output.arms['policy-only'].baseSuccessEndStdErr).toEqual(expect.any(Number));
  // One seed: the difference, but no interval to go by.
  const diff = output.diffs['harness-s - policy-only'].baseSuccessEnd;
  expect(diff).toEqual({ n: 1, mean: output.arms['harness-s'].baseSuccessEnd - output.arms['policy-only'].baseSuccessEnd, lo: diff.mean, hi: diff.mean, excludesZero: false });
  expect(output.ciMethod).toBe('paired t over seeds, 95%');
});

test('an unknown arm is refused before any run starts', () => {
  expect(() => planCompare(stack.config(), ['policy-only', 'oracle'], [1])).toThrow(/unknown arm oracle \(arms: policy-only, harness-s, random-k, all, vote, harness-s-pool, sync, pipelined\)/);
});

test('the harness-s-pool arm rescues with the frozen pool --pool names, and needs one', () => {
  expect(() => planCompare(stack.config(), ['harness-s', 'harness-s-pool'], [1])).toThrow(/the harness-s-pool arm needs --pool HASH/);
  const plan = planCompare(stack.config(), ['harness-s', 'harness-s-pool'], [1], new Date(), undefined, '0123456789abcdef');
  expect(plan.map((p) => [p.arm, p.config.env])).toEqual([
    ['harness-s', { kind: 'sim' }],
    ['harness-s-pool', { kind: 'sim', pool: '0123456789abcdef' }],
  ]);
});
