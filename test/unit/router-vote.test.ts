import { buildProfiles } from '../../core/router/profiles';
import { rankByValidation, type DeadGroup } from '../../core/router/validation';
import { bordaCount, failureSummary, parseBallot, voterLabel, voterMessages, type VoteContext } from '../../core/router/vote';

const siblingIds = ['ec-schema', 'ps-recipe', 'tr-budget'];

const attempts = (successes: number, failures: number, turns = 3) => [
  ...Array.from({ length: successes }, () => ({ success: true, turns, tokens: 10 })),
  ...Array.from({ length: failures }, () => ({ success: false, turns, tokens: 10 })),
];

// ec-schema rescued lookup tasks often (4 attempts: not thin at prior strength 2), tr-budget was tried once (thin),
// ps-recipe never on lookup.
const profiles = buildProfiles(
  [
    {
      taskId: 'probe-1',
      kind: 'lookup',
      baseHarnessId: 'base',
      base: [
        { success: false, failureType: 'wrong_answer', turns: 3 },
        { success: false, failureType: 'turn_limit', turns: 8 },
      ],
      siblings: { 'ec-schema': attempts(3, 1, 4), 'tr-budget': attempts(0, 1, 6) },
    },
  ],
  { version: 1, policyVersion: 'base', priorStrength: 2 },
);

const group: DeadGroup = { taskId: 'lookup-7', kind: 'lookup', failureCounts: { turn_limit: 3, wrong_answer: 5 } };

const context: VoteContext = {
  taskId: 'lookup-7',
  kind: 'lookup',
  taskText: 'Which customer placed the most orders in March? Answer with the customer id.',
  group,
  siblings: [
    { id: 'ec-schema', direction: 'environment_contract', description: 'Shows the table schema contract.' },
    { id: 'ps-recipe', direction: 'procedural_skill', description: 'A worked recipe: plan, compute, verify.' },
    { id: 'tr-budget', direction: 'trajectory_regulation', description: 'Two more turns, verify before finishing.' },
  ],
  profiles,
  k: 2,
};

describe('bordaCount', () => {
  test('with n candidates, position i of a ranking earns n - i points, summed over the ballots', () => {
    // n = 4. a: 4 + 3 + 1 = 8; b: 3 + 4 + 4 = 11; c: 2 + 0 + 3 = 5; d: 0 + 0 + 2 = 2.
    const result = bordaCount(
      [
        ['a', 'b', 'c'],
        ['b', 'a'],
        ['b', 'c', 'd', 'a'],
      ],
      ['a', 'b', 'c', 'd'],
      ['d', 'c', 'b', 'a'],
    );
    expect(result.points).toEqual({ a: 8, b: 11, c: 5, d: 2 });
    expect(result.ranked).toEqual(['b', 'a', 'c', 'd']);
  });

  test('equal points are broken by the validation order, then by id', () => {
    // n = 4: a and b both get 4 + 3 = 7; c and d get 0.
    const result = bordaCount(
      [
        ['a', 'b'],
        ['b', 'a'],
      ],
      ['a', 'b', 'c', 'd'],
      ['b', 'a'],
    );
    expect(result.points).toEqual({ a: 7, b: 7, c: 0, d: 0 });
    // b before a by the validation order; c and d are not in it, so by id.
    expect(result.ranked).toEqual(['b', 'a', 'c', 'd']);
  });

  test('a partial ranking gives the harnesses it leaves out no points', () => {
    const result = bordaCount([['c']], ['a', 'b', 'c'], ['a', 'b', 'c']);
    expect(result.points).toEqual({ a: 0, b: 0, c: 3 });
    expect(result.ranked).toEqual(['c', 'a', 'b']);
  });

  test('ids that are not candidates are ignored and take no place in the ranking', () => {
    // 'ghost' is dropped, so 'a' is first (3 points) and 'b' second (2 points).
    const result = bordaCount([['ghost', 'a', 'b']], ['a', 'b', 'c'], ['c', 'b', 'a']);
    expect(result.points).toEqual({ a: 3, b: 2, c: 0 });
    expect(result.ranked).toEqual(['a', 'b', 'c']);
  });

  test('without any ballots the ranking is the validation order', () => {
    const validation = rankByValidation(profiles, siblingIds, group).ranked;
    expect(bordaCount([], siblingIds, validation).ranked).toEqual(validation);
  });
});

describe('parseBallot', () => {
  test('accepts a bare JSON ballot', () => {
    expect(parseBallot('{"ranking": ["ec-schema", "tr-budget"]}', siblingIds)).toEqual({ ok: true, ranking: ['ec-schema', 'tr-budget'] });
  });

  test('accepts a ballot inside a ```json fence', () => {
    const answer = 'Here is my ranking:\n```json\n{\n  "ranking": ["ps-recipe", "ec-schema"]\n}\n```';
    expect(parseBallot(answer, siblingIds)).toEqual({ ok: true, ranking: ['ps-recipe', 'ec-schema'] });
  });

  test('accepts a ballot surrounded by prose, even prose with braces in it', () => {
    const answer =
      'The base hit {turn_limit} often, so budget first. {"ranking": ["tr-budget", "ec-schema", "ps-recipe"]} Hope this helps.';
    expect(parseBallot(answer, siblingIds)).toEqual({ ok: true, ranking: ['tr-budget', 'ec-schema', 'ps-recipe'] });
  });

  test('rejects a ballot that lists a harness twice, naming it', () => {
    expect(parseBallot('{"ranking": ["ec-schema", "ps-recipe", "ec-schema"]}', siblingIds)).toEqual({
      ok: false,
      reason: 'answer out of schema: ranking: each harness id may appear once; repeated: ec-schema',
    });
  });

  test('rejects an empty ranking', () => {
    expect(parseBallot('{"ranking": []}', siblingIds)).toEqual({
      ok: false,
      reason: 'answer out of schema: ranking: list at least one harness id',
    });
  });

  test('rejects ids that are not siblings, naming them and the valid ids', () => {
    expect(parseBallot('{"ranking": ["ec-schema", "ar-format", "base"]}', siblingIds)).toEqual({
      ok: false,
      reason: 'unknown harness ids: ar-format, base (valid: ec-schema, ps-recipe, tr-budget)',
    });
  });

  test('rejects an answer without any JSON object', () => {
    expect(parseBallot('I would pick ec-schema, then ps-recipe.', siblingIds)).toEqual({
      ok: false,
      reason: 'no JSON object in the answer',
    });
  });

  test('rejects an answer whose object is not valid JSON, with the parser message', () => {
    const result = parseBallot("{'ranking': ['ec-schema']}", siblingIds);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.reason).toMatch(/^answer is not valid JSON: .+/);
  });

  test('rejects a ranking that is not a list, saying where and what was expected', () => {
    expect(parseBallot('{"ranking": "ec-schema"}', siblingIds)).toEqual({
      ok: false,
      reason: 'answer out of schema: ranking: Invalid input: expected array, received string',
    });
  });

  test('rejects an object without a ranking', () => {
    expect(parseBallot('{"best": "ec-schema"}', siblingIds)).toEqual({
      ok: false,
      reason: 'answer out of schema: ranking: Invalid input: expected array, received undefined',
    });
  });
});

describe('failureSummary', () => {
  test('counts the failed base attempts, most frequent failure type first', () => {
    expect(failureSummary(group)).toBe('8/8 base attempts failed: wrong_answer x5, turn_limit x3');
  });

  test('equal counts are ordered by failure type, and zero counts are left out', () => {
    const tied: DeadGroup = { taskId: 't', kind: 'k', failureCounts: { wrong_answer: 2, format_error: 2, turn_limit: 0 } };
    expect(failureSummary(tied)).toBe('4/4 base attempts failed: format_error x2, wrong_answer x2');
  });
});

describe('voterMessages', () => {
  test('the system message states the exact answer format', () => {
    const [system] = voterMessages(context);
    expect(system.role).toBe('system');
    expect(system.content).toContain('{"ranking": ["<harness id>", ...]}');
  });

  test('the user message carries the task, the failure summary, every sibling and the answer format with k', () => {
    const user = voterMessages(context)[1];
    expect(user.role).toBe('user');
    expect(user.content).toContain(context.taskText);
    expect(user.content).toContain('8/8 base attempts failed: wrong_answer x5, turn_limit x3');
    for (const sibling of context.siblings)
      expect(user.content).toContain(`- ${sibling.id} (direction: ${sibling.direction}): ${sibling.description}`);
    expect(user.content).toContain(
      'Answer with only {"ranking": [...]} listing the best harness first. Rank at least 2 of these ids: ec-schema, ps-recipe, tr-budget.',
    );
  });

  test('each sibling shows its evidence for the kind: rescue rate, attempts, thin cells marked, mean turns', () => {
    const user = voterMessages(context)[1].content;
    // lookup/wrong_answer prior: 3/5 over all siblings; ec-schema: (3 + 2 * 0.6) / (4 + 2) = 0.70 over 4 attempts.
    expect(user).toContain('after wrong_answer: rescue rate 0.70 over 4 attempts\n');
    expect(user).toContain('mean turns on lookup tasks: 4.0');
    // tr-budget: (0 + 2 * 0.6) / (1 + 2) = 0.40 over 1 attempt: thin.
    expect(user).toContain('after wrong_answer: rescue rate 0.40 over 1 attempt (thin evidence: mostly the prior)');
    // ps-recipe was never tried on lookup: the prior alone.
    expect(user).toContain('after wrong_answer: rescue rate 0.60 over 0 attempts (untested: the prior alone)');
    expect(user).toContain('mean turns on lookup tasks: not measured');
  });

  test('a long task text is cut to 1500 characters, saying how much was left out', () => {
    const user = voterMessages({ ...context, taskText: 'x'.repeat(2000) })[1].content;
    expect(user).toContain(`${'x'.repeat(1500)}\n[... 500 more characters not shown]`);
    expect(user).not.toContain('x'.repeat(1501));
  });
});

test("a voter's label is its model at its base URL", () => {
  expect(voterLabel({ baseUrl: 'http://127.0.0.1:8000/v1', model: 'qwen3-32b', timeoutSeconds: 30 })).toBe(
    'qwen3-32b@http://127.0.0.1:8000/v1',
  );
});
