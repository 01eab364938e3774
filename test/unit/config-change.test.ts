import { parseRunConfig } from '../../core/config';
import { applyConfigChange } from '../../core/config-change';

const config = parseRunConfig({ steps: 10 });

test('a safe change is applied and the rest of the config stays as it was', () => {
  const next = applyConfigChange(config, { steps: 20, router: { reanchorEvery: 2 }, eval: { every: 5 }, rollout: { concurrency: 2 } }, 4);
  expect(next).toEqual({
    ...config,
    steps: 20,
    router: { ...config.router, reanchorEvery: 2 },
    eval: { ...config.eval, every: 5 },
    rollout: { ...config.rollout, concurrency: 2 },
  });
});

test('a change to anything that shapes sampling or training is refused, naming it and what may change', () => {
  expect(() => applyConfigChange(config, { rollout: { groupSize: 4 } }, 0)).toThrow(
    /rollout: cannot change during a run: groupSize \(safe to change: steps, rollout\.concurrency, router\.reanchorEvery, eval\.enabled, eval\.every, policy\.requestTimeoutSeconds, trainer\.pollSeconds\)/,
  );
  expect(() => applyConfigChange(config, { env: { kind: 'sim' }, seed: 3 }, 0)).toThrow(/\(root\): cannot change during a run: env, seed/);
});

test('a run cannot be cut below the step it is on, and values are checked as in a config', () => {
  expect(() => applyConfigChange(config, { steps: 4 }, 4)).toThrow(/steps: 4 steps have run; give at least 5/);
  expect(applyConfigChange(config, { steps: 5 }, 4).steps).toBe(5);
  expect(() => applyConfigChange(config, { rollout: { concurrency: 0 } }, 0)).toThrow(/rollout\.concurrency: /);
});
