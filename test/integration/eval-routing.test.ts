/**
 * `harness-s eval --route-from`: Rank-1 routed inference outside a run. The
 * evals it names are read back from the run store, each task kind goes to the
 * harness with the best success on it there (the router's own rule), and every
 * episode of the routed eval runs under its kind's harness, against the
 * SIMULATED sim cluster's policy endpoint.
 */
import { createEnvironment } from '../../core/envs/registry';
import { SIM_POLICY_MODEL } from '../../core/config-endpoints';
import { parseRunConfig } from '../../core/config';
import { evaluate, rank1FromEvals, type EvalResult } from '../../cli/eval';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ workers: false });
});
afterAll(async () => {
  await stack?.close();
});

test('eval --route-from sends each kind to its best harness in the named evals, and runs every episode of the kind under it', async () => {
  const config = parseRunConfig(stack.config());
  const env = createEnvironment(config.env);
  const pool = env.harnesses();
  const base = pool[0];
  const common = {
    env,
    envConfig: config.env,
    baseUrl: config.policy.baseUrl,
    model: SIM_POLICY_MODEL,
    apiKey: 'EMPTY',
    concurrency: 4,
    maxTurns: 5,
    samples: 2,
    temperature: 1,
    seed: 3,
    store: stack.store,
    progress: false,
  };
  // The profile evals: every harness of the pool on the same tasks.
  const evals: EvalResult[] = [];
  for (const harness of pool) evals.push(await evaluate({ ...common, evalId: uniqueRunId(`profile-${harness.id}`), harness }));
  const routes = await rank1FromEvals(stack.store, env, base, evals.map((e) => e.evalId).join(','));
  for (const [kind, harness] of Object.entries(routes)) {
    const rate = (id: string) => {
      const cell = evals.find((e) => e.harness === id)!.byKind[kind];
      return cell ? cell.passed / cell.total : 0;
    };
    // Rank-1 is the best on its kind; a harness that only ties the base does not displace it.
    for (const other of pool) expect(rate(harness.id)).toBeGreaterThanOrEqual(rate(other.id));
    if (harness.id !== base.id) expect(rate(harness.id)).toBeGreaterThan(rate(base.id));
  }

  const routed = await evaluate({ ...common, evalId: uniqueRunId('rank1'), harness: base, routes });
  expect(routed.harness).toBe('rank1');
  expect(routed.total).toBe(env.listTasks().length * 2);
  for (const t of routed.trajectories) expect(t.harnessId).toBe(routes[t.taskKind].id);
  expect(routed.interval95.lo).toBeLessThanOrEqual(routed.passed / routed.total);
  expect(routed.interval95.hi).toBeGreaterThanOrEqual(routed.passed / routed.total);

  await expect(rank1FromEvals(stack.store, env, base, 'no-such-eval')).rejects.toThrow(/no eval episodes stored for no-such-eval/);
});
