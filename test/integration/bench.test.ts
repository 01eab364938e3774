/**
 * `harness-s bench`, smaller than --quick, against the test stack: the JSON
 * it prints has the documented shape, its figures are finite (times, rates
 * and event counts positive, idle shares within [0, 1]), and a pipelined row
 * is measured beside the sync one on the SIMULATED latency model.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchJson, benchText, type BenchResult } from '../../core/bench/figures';
import { benchPlan, runBench } from '../../infra/bench/bench';
import { silentLogger, startTestStack, type TestStack } from './stack';

let stack: TestStack;
let result: BenchResult;
const STEPS = 2;

beforeAll(async () => {
  stack = await startTestStack();
  const plan = {
    ...benchPlan({ quick: true, allProfiles: ['balanced'] }),
    sizes: [{ tasks: 8, groupSize: 4 }],
    repeats: 1,
    steps: STEPS,
    speedup: 50,
  };
  result = await runBench({
    ...plan,
    client: stack.client,
    store: stack.store,
    // The bench points the runs at its own sim clusters; the rest is the test stack's small sim run (rescue on).
    rowConfig: stack.config(),
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'harness-s-bench-')),
    logger: silentLogger,
    log: () => undefined,
  });
}, 300_000);

afterAll(async () => {
  await stack?.close();
});

const positive = (x: unknown) => typeof x === 'number' && Number.isFinite(x) && x > 0;
const finite = (x: unknown) => typeof x === 'number' && Number.isFinite(x);

test('--json has the overhead of the size asked for, split, with finite figures', () => {
  const json = JSON.parse(benchJson(result));
  expect(Object.keys(json).sort()).toEqual(['history', 'overhead', 'overheadBySize', 'rows']);
  const { overhead } = json;
  expect(json.overheadBySize).toEqual([overhead]);
  expect(overhead).toMatchObject({ rollouts: 32, tasks: 8, groupSize: 4, repeats: 1 });
  for (const key of [
    'inProcessMsPerRollout',
    'temporalMsPerRollout',
    'storeWritesAloneMsPerRollout',
    'trainerSeconds',
    'trainerMsPerRollout',
  ]) {
    expect([key, positive(overhead[key])]).toEqual([key, true]);
  }
  // Differences of measurements: finite, and the split adds up.
  for (const key of ['overheadMsPerRollout', 'storeWritesMsPerRollout', 'schedulingMsPerRollout'])
    expect([key, finite(overhead[key])]).toEqual([key, true]);
  expect(overhead.overheadMsPerRollout).toBeCloseTo(overhead.temporalMsPerRollout - overhead.inProcessMsPerRollout, 3);
  expect(overhead.schedulingMsPerRollout + overhead.storeWritesMsPerRollout).toBeCloseTo(overhead.overheadMsPerRollout, 3);
});

test('a sync and a pipelined row, SIMULATED, with positive step times and rates and idle shares in [0, 1]', () => {
  const { rows } = JSON.parse(benchJson(result));
  expect(rows.map((r: { profile: string; maxStaleness: number }) => [r.profile, r.maxStaleness])).toEqual([
    ['balanced', 0],
    ['balanced', 1],
  ]);
  expect(rows.some((r: { maxStaleness: number }) => r.maxStaleness >= 1)).toBe(true);
  for (const row of rows) {
    expect(row).toMatchObject({ simulated: true, speedup: 50, steps: STEPS });
    for (const key of ['stepSeconds', 'rolloutSeconds', 'trainSeconds', 'rolloutsPerSecond', 'trainedTokensPerSecond']) {
      expect([key, positive(row[key])]).toEqual([key, true]);
    }
    for (const key of ['inferenceIdleShare', 'trainerIdleShare']) {
      expect([key, finite(row[key]) && row[key] >= 0 && row[key] <= 1]).toEqual([key, true]);
    }
  }
});

test('history counts every run of the bench and each of its steps', () => {
  const { history } = JSON.parse(benchJson(result));
  expect(history.runs.map((r: { label: string }) => r.label)).toEqual(['overhead 32', 'row balanced k=0', 'row balanced k=1']);
  for (const run of history.runs) {
    expect(run.executions).toBeGreaterThanOrEqual(1);
    expect(run.runEvents).toBeGreaterThan(0);
    expect(run.stepEvents).toHaveLength(run.label.startsWith('row') ? STEPS : 1);
    expect(run.stepEvents.every(positive)).toBe(true);
  }
  for (const key of ['meanEventsPerRun', 'meanEventsPerStep', 'meanRunEventsPerStep'])
    expect([key, positive(history[key])]).toEqual([key, true]);
});

test('the table labels the latency-model figures SIMULATED', () => {
  const text = benchText(result);
  expect(text).toContain('(a) orchestration overhead per rollout');
  expect(text).toMatch(/\(b\) step time and throughput, SIMULATED/);
  expect(text).toContain('(c) Temporal history events');
});
