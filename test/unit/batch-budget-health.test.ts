/**
 * The rules behind equal-budget comparisons: the step's task stream, the
 * refills, what a step spends, budgets, and the run health rule.
 */
import { parseRunConfig } from '../../core/config';
import { hasSignal, keepGroupsWithSignal, maxDraws, wantsFreshTask } from '../../core/rl/batch-fill';
import type { GroupSummary } from '../../core/rl/groups';
import { afterEvaluation, afterStep, assessHealth, type HealthWindow, LEARNING, stalledReasons } from '../../core/rl/run-health';
import { summarizeStep, totalSpend } from '../../core/rl/step-summary';
import { tasksFor } from '../../core/rl/task-sampling';
import { budgetStepCap, parseBudget, planCompare } from '../../cli/compare';
import { loadLatencyProfiles, modelledGpuSeconds } from '../../core/latency-profiles';

const group = (rewards: number[], role: 'base' | 'rescue' = 'base', taskId = 't'): GroupSummary => ({
  taskId,
  kind: 'k',
  role,
  rollouts: rewards.map((reward, sample) => ({
    harnessId: role === 'base' ? 'base' : 'sib',
    sample,
    reward,
    success: reward >= 0.5,
    failureType: reward >= 0.5 ? null : 'wrong_answer',
    turns: 1,
    tokens: 10,
    promptTokens: 30,
    completionTokens: 4,
  })),
});

describe("the step's task stream", () => {
  const tasks = Array.from({ length: 40 }, (_, i) => ({ taskId: `t${i}`, kind: i % 2 ? 'a' : 'b' }));
  const sampling = (tasksPerStep: number) => ({ seed: 3, tasksPerStep, heldOut: 0.2, probeTasksPerKind: 1, evalTasksPerKind: 1 });

  test("a longer draw of a step begins with the shorter one: a refilled task is the stream's next, the same in every arm", () => {
    const first = tasksFor(tasks, 'train', sampling(4), 5);
    const stream = tasksFor(tasks, 'train', sampling(12), 5);
    expect(stream.slice(0, 4)).toEqual(first);
    expect(new Set(stream.map((t) => t.taskId)).size).toBe(12);
    // Another step draws another stream.
    expect(tasksFor(tasks, 'train', sampling(4), 6)).not.toEqual(first);
  });
});

describe('refills', () => {
  test('a group has signal when its rewards differ, partial credit included', () => {
    expect(hasSignal(group([0, 0, 0, 0]))).toBe(false);
    expect(hasSignal(group([1, 1, 1, 1]))).toBe(false);
    expect(hasSignal(group([0.25, 0.25, 0.5, 0.25]))).toBe(true);
  });

  test('dynamic sampling asks for a fresh task after any group without signal, judged after rescue', () => {
    expect(wantsFreshTask({ index: 0, base: group([0, 0, 0, 0]), rescue: null }, 'dynamic', 4)).toBe(true);
    expect(wantsFreshTask({ index: 0, base: group([1, 1, 1, 1]), rescue: null }, 'dynamic', 4)).toBe(true);
    expect(wantsFreshTask({ index: 0, base: group([0, 0, 0, 0]), rescue: group([1, 0, 1, 0], 'rescue') }, 'dynamic', 4)).toBe(false);
    expect(wantsFreshTask({ index: 0, base: group([0, 0, 0, 0]), rescue: group([0, 0, 0, 0], 'rescue') }, 'dynamic', 4)).toBe(true);
    expect(wantsFreshTask({ index: 6, base: group([0, 0, 0, 0]), rescue: null }, 'dynamic', 4)).toBe(true);
    // A group that failed for good is recorded as failed, not refilled.
    expect(wantsFreshTask({ index: 0, base: null, rescue: null }, 'dynamic', 4)).toBe(false);
  });

  test('matched asks for one fresh task per dead group of the first tasks, not for its own extras, nor for an all-success group', () => {
    expect(wantsFreshTask({ index: 1, base: group([0, 0, 0, 0]), rescue: null }, 'matched', 4)).toBe(true);
    expect(wantsFreshTask({ index: 4, base: group([0, 0, 0, 0]), rescue: null }, 'matched', 4)).toBe(false);
    expect(wantsFreshTask({ index: 1, base: group([1, 1, 1, 1]), rescue: null }, 'matched', 4)).toBe(false);
    expect(wantsFreshTask({ index: 1, base: group([0, 0, 0, 0]), rescue: null }, 'none', 4)).toBe(false);
  });

  test('dynamic sampling keeps the groups with signal and lists the dropped ones; other refills keep all', () => {
    const training = [
      { taskId: 'a', kind: 'k', role: 'base' as const, rollouts: group([1, 0]).rollouts.map((r, i) => ({ ...r, advantage: i ? -1 : 1 })) },
      { taskId: 'b', kind: 'k', role: 'rescue' as const, rollouts: group([0, 0]).rollouts.map((r) => ({ ...r, advantage: 0 })) },
    ];
    expect(keepGroupsWithSignal(training, 'dynamic')).toEqual({
      kept: [training[0]],
      dropped: [{ taskId: 'b', role: 'rescue', reward: 0 }],
    });
    expect(keepGroupsWithSignal(training, 'matched')).toEqual({ kept: training, dropped: [] });
  });

  test('a step draws 3 x tasksPerStep at most unless maxDraws says, and only its first tasks without a refill', () => {
    expect(maxDraws({ refill: 'none' }, 8)).toBe(8);
    expect(maxDraws({ refill: 'dynamic' }, 8)).toBe(24);
    expect(maxDraws({ refill: 'dynamic', maxDraws: 10 }, 8)).toBe(10);
  });

  test('a config whose maxDraws is below tasksPerStep, or whose budget names both or neither measure, is refused where it is wrong', () => {
    expect(() => parseRunConfig({ rollout: { tasksPerStep: 8 }, sampling: { refill: 'dynamic', maxDraws: 4 } })).toThrow(
      /sampling\.maxDraws.*at least that many/s,
    );
    expect(() => parseRunConfig({ budget: { rollouts: 10, tokens: 10 } })).toThrow(/budget.*exactly one of rollouts or tokens/s);
    expect(() => parseRunConfig({ budget: {} })).toThrow(/budget.*exactly one of rollouts or tokens/s);
    expect(() => parseRunConfig({ sampling: { refill: 'always' } })).toThrow(/sampling\.refill/);
  });
});

describe('spend', () => {
  test("a step counts every rollout it ran, their server tokens and the trainer's tokens; the run sums its steps", () => {
    const base = [group([0, 0, 0, 0], 'base', 'a'), group([1, 0, 1, 0], 'base', 'b')];
    const rescue = [group([1, 1, 0, 0], 'rescue', 'a')];
    const step = summarizeStep({
      step: 0,
      policyVersionBefore: 'p0',
      policyVersion: 'p1',
      profileVersion: 1,
      baseGroups: base,
      rescueGroups: rescue,
      trainingGroups: [],
      datums: 0,
      trainerMetrics: {},
      durationSeconds: 1,
      trainerTokens: 500,
    });
    expect(step.spend).toEqual({ rollouts: 12, promptTokens: 12 * 30, completionTokens: 12 * 4, trainerTokens: 500 });
    // A step recorded before spend was counted still counts its rollouts.
    const old = { baseRollouts: 8, rescueRollouts: 4 };
    expect(totalSpend([step, old])).toEqual({
      rollouts: 24,
      policyTokens: 12 * 34,
      promptTokens: 360,
      completionTokens: 48,
      trainerTokens: 500,
      gpuSeconds: null,
    });
  });

  test("SIMULATED GPU-seconds: prefill and full-batch decode per token, the trainer's step, an adapter load per replica", () => {
    const profile = Object.values(loadLatencyProfiles())[0];
    const zero = modelledGpuSeconds(profile, { promptTokens: 0, completionTokens: 0, trainerTokens: 0 });
    expect(zero).toBeCloseTo(
      profile.trainer.optimStepSeconds +
        profile.trainer.saveWeightsForSamplerSeconds +
        profile.publish.adapterLoadSeconds * profile.inference.servers,
      9,
    );
    const s = profile.tokenScale;
    const n = profile.inference.maxSequencesPerServer;
    expect(modelledGpuSeconds(profile, { promptTokens: 1000, completionTokens: 0, trainerTokens: 0 }) - zero).toBeCloseTo(
      (1000 * s) / profile.inference.prefillTokensPerSecond,
      9,
    );
    expect(modelledGpuSeconds(profile, { promptTokens: 0, completionTokens: 1000, trainerTokens: 0 }) - zero).toBeCloseTo(
      (1000 * s * (n + profile.inference.halfSaturationSequences)) / (n * profile.inference.peakDecodeTokensPerSecond),
      9,
    );
    expect(modelledGpuSeconds(profile, { promptTokens: 0, completionTokens: 0, trainerTokens: 1000 }) - zero).toBeCloseTo(
      (1000 * s) / profile.trainer.trainTokensPerSecond,
      9,
    );
  });
});

describe('budgets in compare', () => {
  test('--budget reads rollouts=N or tokens=N and nothing else, saying what it wants', () => {
    expect(parseBudget('rollouts=2000')).toEqual({ rollouts: 2000 });
    expect(parseBudget('tokens=10')).toEqual({ tokens: 10 });
    for (const bad of ['rollouts', 'rollouts=0', 'steps=3', 'tokens=1.5', ''])
      expect(() => parseBudget(bad)).toThrow(/--budget: .* is not rollouts=N or tokens=N/);
  });

  test('the step cap is what the cheapest arm needs for a rollout budget, 10 x steps for tokens', () => {
    const raw = { steps: 20, rollout: { tasksPerStep: 16, groupSize: 8 } };
    expect(budgetStepCap(raw, { rollouts: 3200 })).toBe(25);
    expect(budgetStepCap(raw, { rollouts: 3201 })).toBe(26);
    expect(budgetStepCap(raw, { tokens: 1 })).toBe(200);
  });

  test('every arm of a budgeted compare carries the budget; each arm sets rescue and refill as its name says', () => {
    const arms = ['policy-only', 'harness-s', 'dynamic-sampling', 'policy-only-matched', 'harness-s+dynamic-sampling'];
    const plan = planCompare({ sampling: { refill: 'dynamic', maxDraws: 40 } }, arms, [1], new Date(0), undefined, undefined, {
      rollouts: 100,
    });
    expect(plan.map((p) => [p.arm, p.config.rescue.enabled, p.config.sampling.refill, p.config.budget])).toEqual([
      ['policy-only', false, 'none', { rollouts: 100 }],
      ['harness-s', true, 'none', { rollouts: 100 }],
      ['dynamic-sampling', false, 'dynamic', { rollouts: 100 }],
      ['policy-only-matched', false, 'matched', { rollouts: 100 }],
      ['harness-s+dynamic-sampling', true, 'dynamic', { rollouts: 100 }],
    ]);
    // The user's maxDraws is kept; names and ids stay valid with the '+'.
    expect(plan[4].config.sampling.maxDraws).toBe(40);
    expect(plan[4].config.name).toBe('compare-harness-s-dynamic-sampling');
    expect(plan[4].runId).toMatch(/^compare-cmp-harness-s-dynamic-sampling-s1-/);
  });
});

describe('run health', () => {
  const rule = { minLiveShare: 0.2, steps: 3, evaluations: 2, minGain: 0.01, pause: false };

  test('too few live groups for `steps` steps in a row stalls a run; one good step in the window keeps it learning', () => {
    let window: HealthWindow = { liveShares: [], evalSuccess: [] };
    for (const share of [0.1, 0.05]) window = afterStep(window, rule, share);
    expect(stalledReasons(rule, window)).toEqual([]); // two steps are not three
    window = afterStep(window, rule, 0.0);
    expect(stalledReasons(rule, window)).toEqual([
      'fewer than 20.0% of groups had a learning signal in each of the last 3 steps (10.0%, 5.0%, 0.0%)',
    ]);
    window = afterStep(window, rule, 0.5);
    expect(stalledReasons(rule, window)).toEqual([]);
    expect(window.liveShares).toHaveLength(3);
  });

  test('no gain over the last evaluations stalls a run; a gain past minGain does not', () => {
    let window: HealthWindow = { liveShares: [], evalSuccess: [] };
    for (const success of [0.3, 0.32, 0.305]) window = afterEvaluation(window, rule, success);
    expect(stalledReasons(rule, window)).toEqual([
      'base success on the eval split moved +0.5 points over the last 2 evaluations (30.0% → 32.0% → 30.5%), not more than 1.0',
    ]);
    window = afterEvaluation(window, rule, 0.4);
    expect(stalledReasons(rule, window)).toEqual([]);
  });

  test('a stalled run stays stalled since the step it first tripped at; rules set to 0 never trip', () => {
    const stalledWindow = { liveShares: [0, 0, 0], evalSuccess: [] };
    const first = assessHealth(rule, stalledWindow, LEARNING, 4);
    expect(first).toMatchObject({ state: 'stalled', sinceStep: 4 });
    expect(assessHealth(rule, stalledWindow, first, 5).sinceStep).toBe(4);
    expect(
      assessHealth({ ...rule, minLiveShare: 0, evaluations: 0 }, { liveShares: [0, 0, 0], evalSuccess: [0, 0, 0] }, LEARNING, 5),
    ).toEqual(LEARNING);
  });
});
