import { buildProfiles, isThinCell, profileMatrix, profileShift, smoothedRescueRate, type ProbeOutcome } from '../../core/router/profiles';
import { routeByValidation } from '../../core/router/validation';
import { kindSuccessRate, rank1Harness } from '../../core/router/rank1';

const attempts = (successes: number, failures: number, turns = 3) => [
  ...Array.from({ length: successes }, () => ({ success: true, turns, tokens: 10 })),
  ...Array.from({ length: failures }, () => ({ success: false, turns, tokens: 10 })),
];

const outcomes: ProbeOutcome[] = [
  {
    taskId: 'lookup-1',
    kind: 'lookup',
    baseHarnessId: 'base',
    base: [
      { success: false, failureType: 'wrong_answer', turns: 5 },
      { success: false, failureType: 'wrong_answer', turns: 5 },
    ],
    siblings: { schema: attempts(4, 0), recipe: attempts(0, 4), budget: attempts(1, 3, 6) },
  },
  {
    taskId: 'api-1',
    kind: 'api_call',
    baseHarnessId: 'base',
    base: [
      { success: false, failureType: 'format_error', turns: 1 },
      { success: true, failureType: null, turns: 2 },
    ],
    siblings: { schema: attempts(0, 4), recipe: attempts(0, 4), format: attempts(3, 1) },
  },
  {
    taskId: 'lookup-2',
    kind: 'lookup',
    baseHarnessId: 'base',
    base: [{ success: true, failureType: null, turns: 2 }],
    siblings: { schema: attempts(0, 4) },
  },
];
const profiles = buildProfiles(outcomes, { version: 1, policyVersion: 'base', priorStrength: 2 });

test('evidence is kept per harness, task kind and base failure type; tasks the base solved carry none', () => {
  const cell = profiles.cells.find((c) => c.harnessId === 'schema' && c.kind === 'lookup')!;
  expect(cell).toMatchObject({ failureType: 'wrong_answer', attempts: 4, successes: 4 });
  expect(profiles.cells.filter((c) => c.harnessId === 'schema' && c.kind === 'lookup')).toHaveLength(1);
});

test('the rescue rate shrinks thin evidence towards how rescuable that failure is across siblings', () => {
  // lookup/wrong_answer across siblings: (4 + 0 + 1) / 12; schema's cell 4/4 -> (4 + 2 * 5/12) / (4 + 2).
  expect(smoothedRescueRate(profiles, 'schema', 'lookup', 'wrong_answer')).toBeCloseTo((4 + (2 * 5) / 12) / 6, 10);
  // A sibling never tried on that cell gets the prior itself.
  expect(smoothedRescueRate(profiles, 'format', 'lookup', 'wrong_answer')).toBeCloseTo(5 / 12, 10);
});

test('cells with fewer attempts than twice the prior are thin', () => {
  const thin = { harnessId: 'x', kind: 'k', failureType: 'f', attempts: 3, successes: 1, totalTurns: 9, totalTokens: 0 };
  expect(isThinCell(profiles, thin)).toBe(true);
  expect(isThinCell(profiles, { ...thin, attempts: 4 })).toBe(false);
});

test('the validation rule picks the top-k siblings for the dead group kind and failure types', () => {
  const lookup = routeByValidation(
    profiles,
    ['schema', 'recipe', 'budget', 'format'],
    { taskId: 't', kind: 'lookup', failureCounts: { wrong_answer: 8 } },
    2,
  );
  // format was never tried on lookup: it gets the prior (5/12), above budget's measured (1 + 2 * 5/12) / 6.
  expect(lookup.chosen).toEqual(['schema', 'format']);
  expect(lookup.scores.budget).toBeLessThan(lookup.scores.format);
  const api = routeByValidation(
    profiles,
    ['schema', 'recipe', 'budget', 'format'],
    { taskId: 't', kind: 'api_call', failureCounts: { format_error: 8 } },
    1,
  );
  expect(api.chosen).toEqual(['format']);
});

test('equal evidence is broken by cost: fewer turns first, then by id', () => {
  const tied = buildProfiles(
    [
      {
        taskId: 'a',
        kind: 'k',
        baseHarnessId: 'base',
        base: [{ success: false, failureType: 'f', turns: 5 }],
        siblings: { slow: attempts(2, 2, 8), fast: attempts(2, 2, 2), also: attempts(2, 2, 2) },
      },
    ],
    { version: 2, policyVersion: 'p', priorStrength: 0 },
  );
  expect(routeByValidation(tied, ['slow', 'fast', 'also'], { taskId: 't', kind: 'k', failureCounts: { f: 1 } }, 3).chosen).toEqual([
    'also',
    'fast',
    'slow',
  ]);
});

test('the shift between two profile versions is the mean absolute change of the rescue rates', () => {
  const same = buildProfiles(outcomes, { version: 2, policyVersion: 'later', priorStrength: 2 });
  expect(profileShift(profiles, same)).toBe(0);
  const moved = buildProfiles(
    outcomes.map((o) => ({
      ...o,
      siblings: Object.fromEntries(Object.entries(o.siblings).map(([id, a]) => [id, a.map((x) => ({ ...x, success: !x.success }))])),
    })),
    { version: 2, policyVersion: 'later', priorStrength: 2 },
  );
  expect(profileShift(profiles, moved)).toBeGreaterThan(0.1);
});

test('the profile matrix sums each sibling over the failure types of a kind and marks thin cells', () => {
  const matrix = profileMatrix(profiles);
  expect(matrix.kinds).toEqual(['api_call', 'lookup']);
  expect(matrix.harnesses).toEqual(['budget', 'format', 'recipe', 'schema']);
  // schema on lookup: 4/4 on lookup-1 (lookup-2 was solved by the base: no rescue evidence); prior 5/12.
  expect(matrix.cells.schema.lookup).toMatchObject({ attempts: 4, successes: 4, thin: false, meanTurns: 3, meanTokens: 10 });
  expect(matrix.cells.schema.lookup.rescueRate).toBeCloseTo((4 + (2 * 5) / 12) / 6, 10);
  // format was never tried on lookup: no attempts, the prior, and thin.
  expect(matrix.cells.format.lookup).toMatchObject({ attempts: 0, thin: true, meanTurns: null });
  expect(matrix.cells.format.lookup.rescueRate).toBeCloseTo(5 / 12, 10);
});

test('Rank-1 routes a kind to the harness with the best smoothed success on all its probe tasks, the base on a tie', () => {
  // lookup: base 1/3, schema 4/8, recipe 0/4, budget 1/4 over lookup's probe tasks.
  expect(rank1Harness(profiles, ['base', 'schema', 'recipe', 'budget', 'format'], 'base', 'lookup')).toBe('schema');
  // api_call: base 1/2, format 3/4: format.
  expect(rank1Harness(profiles, ['base', 'schema', 'recipe', 'budget', 'format'], 'base', 'api_call')).toBe('format');
  // A kind with no evidence at all: everyone gets the same prior, and the base keeps the task.
  expect(rank1Harness(profiles, ['base', 'schema', 'format'], 'base', 'multi_step')).toBe('base');
  expect(kindSuccessRate(profiles, 'schema', 'lookup')).toBeCloseTo((4 + 2 * (6 / 19)) / (8 + 2), 10);
});

test('a sibling attempt on a task the base failed in two ways counts once in the matrix, though it is evidence for both failure types', () => {
  const twoWays = buildProfiles(
    [
      {
        taskId: 'm1',
        kind: 'multi',
        baseHarnessId: 'base',
        base: [
          { success: false, failureType: 'wrong_answer', turns: 5 },
          { success: false, failureType: 'turn_limit', turns: 5 },
        ],
        siblings: { recipe: attempts(3, 1) },
      },
    ],
    { version: 1, policyVersion: 'p', priorStrength: 0 },
  );
  expect(twoWays.cells.filter((c) => c.harnessId === 'recipe').map((c) => [c.failureType, c.attempts])).toEqual([
    ['turn_limit', 4],
    ['wrong_answer', 4],
  ]);
  expect(profileMatrix(twoWays).cells.recipe.multi).toMatchObject({ attempts: 4, successes: 3, rescueRate: 0.75 });
});

test('Rank-1 judges a kind on the fixed probe sample only: recent dead groups probed for rescue evidence do not skew it', () => {
  const outcome = (taskId: string, fixedSample: boolean, baseOk: boolean, hardOk: boolean) => ({
    taskId,
    kind: 'k',
    baseHarnessId: 'base',
    fixedSample,
    base: [
      { success: baseOk, failureType: baseOk ? null : 'wrong_answer', turns: 2 },
      { success: baseOk, failureType: baseOk ? null : 'wrong_answer', turns: 2 },
    ],
    siblings: { hard: attempts(hardOk ? 2 : 0, hardOk ? 0 : 2) },
  });
  // On the fixed sample the base solves everything and `hard` nothing; on dead groups only `hard` rescues.
  const measured = buildProfiles(
    [
      outcome('f1', true, true, false),
      outcome('f2', true, true, false),
      outcome('d1', false, false, true),
      outcome('d2', false, false, true),
      outcome('d3', false, false, true),
    ],
    { version: 2, policyVersion: 'p', priorStrength: 2 },
  );
  expect(rank1Harness(measured, ['base', 'hard'], 'base', 'k')).toBe('base');
  // The dead groups still count as rescue evidence.
  expect(profileMatrix(measured).cells.hard.k).toMatchObject({ attempts: 6, successes: 6 });
});
