import { parseRunConfig } from '../../core/config';
import { applyConfigChange } from '../../core/config-change';

const config = parseRunConfig({ steps: 10 });

test('a safe change is applied and the rest of the config stays as it was', () => {
  const next = applyConfigChange(config, { steps: 20, eval: { every: 5 }, rollout: { concurrency: 2 } }, 4);
  expect(next).toEqual({ ...config, steps: 20, eval: { ...config.eval, every: 5 }, rollout: { ...config.rollout, concurrency: 2 } });
});

test('a change to anything that shapes sampling, routing or training is refused, naming it and what may change', () => {
  expect(() => applyConfigChange(config, { rollout: { groupSize: 4 } }, 0)).toThrow(
    /rollout: cannot change during a run: groupSize \(safe to change: steps, rollout\.concurrency, eval\.enabled, eval\.every, policy\.requestTimeoutSeconds, trainer\.pollSeconds, checkpoint\.every, checkpoint\.keep, checkpoint\.onLoss, pipeline\.maxStaleness, budget, health\.minLiveShare, health\.steps, health\.evaluations, health\.minGain, health\.pause\)/,
  );
  expect(() => applyConfigChange(config, { router: { reanchorEvery: 2 } }, 0)).toThrow(/\(root\): cannot change during a run: router/);
  expect(() => applyConfigChange(config, { env: { kind: 'sim' }, seed: 3 }, 0)).toThrow(/\(root\): cannot change during a run: env, seed/);
});

test('a run cannot end before the steps done and the one in flight, and values are checked as in a config', () => {
  expect(() => applyConfigChange(config, { steps: 4 }, 5)).toThrow(/steps: 5 steps have run or are running; give at least 5/);
  expect(applyConfigChange(config, { steps: 5 }, 5).steps).toBe(5);
  expect(() => applyConfigChange(config, { rollout: { concurrency: 0 } }, 0)).toThrow(/rollout\.concurrency: /);
});

test('a section the config lacks (a run older than it) stays absent unless the change names it; no defaults are filled in', () => {
  const { eval: _absent, ...older } = config;
  const next = applyConfigChange(older as typeof config, { steps: 30 }, 0);
  expect('eval' in next).toBe(false);
  expect(applyConfigChange(older as typeof config, { eval: { every: 5 } }, 0).eval).toEqual({ every: 5 });
});

test('checkpoint settings may change during a run; a config without them gets the defaults it changes', () => {
  const config = parseRunConfig({});
  expect(applyConfigChange(config, { checkpoint: { every: 10, onLoss: 'pause' } }, 0).checkpoint).toEqual({
    every: 10,
    keep: 3,
    onLoss: 'pause',
  });
  expect(() => applyConfigChange(config, { checkpoint: { keep: 0 } }, 0)).toThrow(/checkpoint\.keep/);
});

test('pipelining can be switched on or off during a run, also for a run whose config predates it', () => {
  const config = parseRunConfig({ steps: 10 });
  expect(applyConfigChange(config, { pipeline: { maxStaleness: 2 } }, 3).pipeline).toEqual({ maxStaleness: 2, whenStale: 'wait' });
  const older = { ...config } as Partial<typeof config>;
  delete older.pipeline;
  expect(applyConfigChange(older as typeof config, { pipeline: { maxStaleness: 1 } }, 3).pipeline).toEqual({
    maxStaleness: 1,
    whenStale: 'wait',
  });
  expect(() => applyConfigChange(config, { pipeline: { whenStale: 'wait' } }, 3)).toThrow(
    /pipeline: cannot change during a run: whenStale/,
  );
  expect(() => applyConfigChange(config, { pipeline: { maxStaleness: 9 } }, 3)).toThrow(/pipeline\.maxStaleness/);
});

test('a run may get a budget, a new one, or other health settings while it runs; a run from before the rule gets its defaults', () => {
  const config = parseRunConfig({ steps: 10, budget: { rollouts: 500 } });
  expect(applyConfigChange(config, { budget: { tokens: 9000 } }, 3).budget).toEqual({ tokens: 9000 });
  expect(() => applyConfigChange(config, { budget: { rollouts: 1, tokens: 1 } }, 3)).toThrow(/budget.*exactly one of rollouts or tokens/s);
  expect(applyConfigChange(config, { health: { pause: true } }, 3).health).toEqual({ ...config.health, pause: true });
  const older = { ...config } as Partial<typeof config>;
  delete older.health;
  expect(applyConfigChange(older as typeof config, { health: { steps: 2 } }, 3).health).toEqual({
    minLiveShare: 0.1,
    steps: 2,
    evaluations: 3,
    minGain: 0,
    pause: false,
  });
  expect(() => applyConfigChange(config, { health: { steps: 0 } }, 3)).toThrow(/health\.steps/);
});
