import { failureDigest, routeDeadGroup, type RouteRequest } from '../../core/router/router';
import { buildProfiles } from '../../core/router/profiles';
import { routeByValidation } from '../../core/router/validation';

const ids = ['a', 'b', 'c', 'd', 'e'];
const profiles = buildProfiles(
  [
    {
      taskId: 'p',
      kind: 'k',
      baseHarnessId: 'base',
      base: [{ success: false, failureType: 'wrong_answer', turns: 3 }],
      siblings: Object.fromEntries(
        ids.map((id, i) => [id, Array.from({ length: 4 }, (_, j) => ({ success: j < i, turns: 3, tokens: 9 }))]),
      ),
    },
  ],
  { version: 3, policyVersion: 'p', priorStrength: 2 },
);
const request = (overrides: Partial<RouteRequest>): RouteRequest => ({
  strategy: 'validation',
  profiles,
  k: 2,
  groupSize: 8,
  seed: 1,
  step: 0,
  voters: [],
  taskText: '',
  siblings: ids.map((id) => ({ id, direction: 'procedural_skill', description: id })),
  group: { taskId: 't1', kind: 'k', failureCounts: { wrong_answer: 8 } },
  ...overrides,
});

test('every decision says what the router saw: kind, failure summary and its digest, profile version', async () => {
  const decision = await routeDeadGroup(request({}));
  expect(decision).toMatchObject({
    taskId: 't1',
    kind: 'k',
    strategy: 'validation',
    profileVersion: 3,
    fallback: false,
    votes: [],
    failureSummary: '8/8 base attempts failed: wrong_answer x8',
    failureCounts: { wrong_answer: 8 },
    failureDigest: failureDigest('t1', '8/8 base attempts failed: wrong_answer x8'),
  });
  expect(decision.chosen).toEqual(routeByValidation(profiles, ids, decision, 2).chosen);
  expect(failureDigest('t1', 'x')).not.toBe(failureDigest('t2', 'x'));
});

test('random picks k distinct siblings, the same for the same seed, step and task, others for another task', async () => {
  const first = await routeDeadGroup(request({ strategy: 'random' }));
  expect(new Set(first.chosen).size).toBe(2);
  expect((await routeDeadGroup(request({ strategy: 'random' }))).chosen).toEqual(first.chosen);
  const draws = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      routeDeadGroup(request({ strategy: 'random', group: { taskId: `t${i}`, kind: 'k', failureCounts: { wrong_answer: 8 } } })),
    ),
  );
  expect(new Set(draws.map((d) => d.chosen.join())).size).toBeGreaterThan(3);
});

test('all sends the group to every sibling; with more siblings than G rollouts, to the G best by evidence', async () => {
  expect((await routeDeadGroup(request({ strategy: 'all' }))).chosen).toEqual(ids);
  // Evidence: e rescued 4/4, d 3/4, c 2/4, ...
  expect((await routeDeadGroup(request({ strategy: 'all', groupSize: 3 }))).chosen).toEqual(['e', 'd', 'c']);
});

test('vote without a usable voter falls back to the validation rule and says so', async () => {
  const decision = await routeDeadGroup(
    request({ strategy: 'vote', voters: [{ baseUrl: 'http://127.0.0.1:9/v1', model: 'm', timeoutSeconds: 1 }] }),
  );
  expect(decision).toMatchObject({ strategy: 'vote', fallback: true, chosen: ['e', 'd'] });
  expect(decision.votes).toHaveLength(1);
  expect(decision.votes[0].ok).toBe(false);
});
