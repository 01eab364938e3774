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
import { createActivities } from '../../activities';
import { createEnvironment } from '../../core/envs/registry';
import { totalSpend, type StepSummary } from '../../core/rl/step-summary';
import { TrainerSessions } from '../../core/trainer/tinker/sessions';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { loadLatencyProfiles, modelledGpuSeconds } from '../../core/latency-profiles';
import { silentLogger, startTestStack, type TestStack } from './stack';

const ROOT = path.resolve(__dirname, '..', '..');
let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(async () => {
  await stack?.close();
});

async function sampleOf(runId: string, phase: 'train' | 'eval') {
  const { rows } = await stack.store.queryForTests(
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
    // Each run names the policy it ended on (its last evaluation's), to evaluate further with `eval --model`.
    const ended = await Promise.all(
      [policyOnly, harnessS, randomK].map(async (id) => (await stack.store.evaluations(id)).at(-1)?.policyVersion),
    );
    expect(['policy-only', 'harness-s', 'random-k'].map((arm) => result.runs[arm][seed].policyVersion)).toEqual(ended);
    expect(new Set(ended).size).toBe(3);
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
    expect(Object.keys(figures as object).sort()).toEqual([
      'baseSuccessEnd',
      'baseSuccessEndStdErr',
      'extraRollouts',
      'liveGroupFraction',
      'rank1SuccessEnd',
      'rescueRate',
      'spend',
      'steps',
      'trainingSeconds',
    ]);
    // No latency model in this stack: no simulated GPU-seconds.
    expect(Object.keys((figures as { spend: object }).spend).sort()).toEqual(['policyTokens', 'rollouts', 'trainerTokens']);
  }
  expect(output.arms['policy-only'].extraRollouts).toBe(0);
  expect(output.arms['policy-only'].baseSuccessEndStdErr).toEqual(expect.any(Number));
  // One seed: the difference, but no interval to go by.
  const diff = output.diffs['harness-s - policy-only'].baseSuccessEnd;
  expect(diff).toEqual({
    n: 1,
    mean: output.arms['harness-s'].baseSuccessEnd - output.arms['policy-only'].baseSuccessEnd,
    lo: diff.mean,
    hi: diff.mean,
    excludesZero: false,
  });
  expect(output.ciMethod).toBe('paired t over seeds, 95%');
});

test('an unknown arm is refused before any run starts', () => {
  expect(() => planCompare(stack.config(), ['policy-only', 'oracle'], [1])).toThrow(
    /unknown arm oracle \(arms: policy-only, harness-s, dynamic-sampling, policy-only-matched, harness-s\+dynamic-sampling, random-k, all, vote, harness-s-pool, sync, pipelined\)/,
  );
});

test('the harness-s-pool arm rescues with the frozen pool --pool names, and needs one', () => {
  expect(() => planCompare(stack.config(), ['harness-s', 'harness-s-pool'], [1])).toThrow(/the harness-s-pool arm needs --pool HASH/);
  const plan = planCompare(stack.config(), ['harness-s', 'harness-s-pool'], [1], new Date(), undefined, '0123456789abcdef');
  expect(plan.map((p) => [p.arm, p.config.env])).toEqual([
    ['harness-s', { kind: 'sim' }],
    ['harness-s-pool', { kind: 'sim', pool: '0123456789abcdef' }],
  ]);
});

/** Every training rollout of a run as the store holds it: step, task, role, and the tokens the inference server processed. */
async function trainRollouts(runId: string) {
  const { rows } = await stack.store.queryForTests(
    `SELECT step, task_id, role, prompt_tokens, completion_tokens FROM trajectories WHERE run_id = $1 AND phase = 'train' AND superseded_by IS NULL ORDER BY step, task_id`,
    [runId],
  );
  return rows as Array<{ step: number; task_id: string; role: string; prompt_tokens: number; completion_tokens: number }>;
}

test('at an equal rollout budget each arm stops at its budget, its spend is what the store holds, and refills draw the same stream in the same order', async () => {
  const budget = { rollouts: 40 };
  const arms = ['policy-only', 'harness-s', 'dynamic-sampling', 'policy-only-matched'];
  const plan = planCompare(stack.config({ steps: 6 }), arms, [3], new Date(), undefined, undefined, budget);
  const result = await runCompare({ client: stack.client, plan, parallel: 2, progress: () => undefined, budget });
  expect(result.budget).toEqual(budget);
  expect(result.failures).toEqual([]);

  const firstTasks = new Map<number, string[]>();
  const streams: Record<string, Map<number, string[]>> = {};
  for (const arm of arms) {
    const run = result.runs[arm]['3'];
    const rollouts = await trainRollouts(run.runId);
    // Spend, read back from the host: every stored training rollout, and their tokens.
    expect(run.spend.rollouts).toBe(rollouts.length);
    expect(run.spend.policyTokens).toBe(rollouts.reduce((n, r) => n + r.prompt_tokens + r.completion_tokens, 0));
    expect(rollouts.every((r) => r.prompt_tokens > 0 && r.completion_tokens > 0)).toBe(true);
    // It trained until its budget, and not a step past it.
    const steps = [...new Set(rollouts.map((r) => r.step))];
    expect(run.steps).toBe(steps.length);
    expect(rollouts.length).toBeGreaterThanOrEqual(budget.rollouts);
    expect(rollouts.filter((r) => r.step < steps.length - 1).length).toBeLessThan(budget.rollouts);
    // The tasks each step drew.
    streams[arm] = new Map(
      steps.map((step) => [step, [...new Set(rollouts.filter((r) => r.step === step && r.role === 'base').map((r) => r.task_id))].sort()]),
    );
    if (arm === 'policy-only') for (const [step, tasks] of streams[arm]) firstTasks.set(step, tasks);
  }
  // Every arm's step starts with the same 4 tasks; an arm that drew more drew them from the same stream.
  for (const arm of arms) {
    for (const [step, tasks] of streams[arm]) {
      const first = firstTasks.get(step);
      if (!first) continue; // policy-only spent its budget in fewer steps
      expect(tasks.filter((t) => first.includes(t)).sort()).toEqual(first);
    }
  }
  for (const step of streams['dynamic-sampling'].keys()) {
    const ds = streams['dynamic-sampling'].get(step)!;
    const matched = streams['policy-only-matched'].get(step);
    if (!matched) continue;
    // The fresh tasks of both refills are the stream's next ones: the shorter list of extras is a subset of the longer.
    const [fewer, more] = [ds, matched]
      .map((t) => t.filter((id) => !firstTasks.get(step)?.includes(id)))
      .sort((a, b) => a.length - b.length);
    expect(more).toEqual(expect.arrayContaining(fewer));
  }
  // Dynamic sampling trains on groups with signal only; policy-only keeps its dead groups.
  expect(result.runs['dynamic-sampling']['3'].liveGroupFraction).toBe(1);
  expect(result.runs['policy-only']['3'].rescueRate).toBe(0);
});

test('a worker given the latency profile prices a sim step in SIMULATED GPU-seconds when it records it; a run sums them only where every step has them', async () => {
  const plan = planCompare(stack.config({ steps: 1 }), ['harness-s'], [4]);
  const result = await runCompare({ client: stack.client, plan, parallel: 1, progress: () => undefined });
  const runId = result.runs['harness-s']['4'].runId;
  // This stack's workers have no profile: no GPU-seconds.
  const [step0] = (await stack.store.steps(runId)).map((s) => s.summary);
  expect(step0.spend!.gpuSeconds).toBeUndefined();
  expect(result.runs['harness-s']['4'].spend.gpuSeconds).toBeUndefined();

  // A worker with the profile records the same step (as step 1) priced.
  const profile = loadLatencyProfiles().balanced;
  const activities = createActivities({
    store: stack.store,
    logger: silentLogger,
    environmentFor: (c) => createEnvironment(c.env),
    trainerSessions: new TrainerSessions(silentLogger),
    simLatency: profile,
  });
  await activities.recordStep({ runId, summary: { ...(step0 as StepSummary), step: 1 } });
  const step1 = (await stack.store.steps(runId)).map((s) => s.summary)[1];
  expect(step1.spend!.gpuSeconds).toBeGreaterThan(0);
  expect(step1.spend!.gpuSeconds).toBeCloseTo(modelledGpuSeconds(profile, step0.spend!), 9);
  // A run's GPU-seconds are summed only where every step has them.
  expect(totalSpend([step0, step1]).gpuSeconds).toBeNull();
  expect(totalSpend([step1]).gpuSeconds).toBe(step1.spend!.gpuSeconds);
});
