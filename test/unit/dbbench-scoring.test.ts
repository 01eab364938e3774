import {
  agentBenchReport,
  matchAnswerExact,
  matchAnswerNormalized,
  normalizedAnswerItems,
  scoreEpisode,
  tableHashQuery,
  type EpisodeScoreInput,
} from '../../core/envs/dbbench/scoring';

describe('exact matching (AgentBench v0.2)', () => {
  test('the same single item matches', () => {
    expect(matchAnswerExact(' ["March 19, 1998"]', ['March 19, 1998'])).toBe(true);
  });

  test('single items compare as floats when both convert', () => {
    expect(matchAnswerExact(' ["1"]', ['1.0'])).toBe(true);
    expect(matchAnswerExact(' [2011]', ['2011.0'])).toBe(true);
    expect(matchAnswerExact(' 17', ['17'])).toBe(true); // eval gives an int, list() fails, [' 17'] is compared
    expect(matchAnswerExact(' ["1.001"]', ['1.0'])).toBe(false);
  });

  test('single items that are not numbers must be equal, case included', () => {
    expect(matchAnswerExact(' ["giza"]', ['Giza'])).toBe(false);
    expect(matchAnswerExact(' ["none"]', ['none'])).toBe(true);
    expect(matchAnswerExact(' [None]', ['none'])).toBe(false);
  });

  test('several items compare as sets', () => {
    expect(matchAnswerExact(' ["2–0", "1–0"]', ['1–0', '2–0'])).toBe(true);
    expect(matchAnswerExact(' ["1–0", "1–0", "2–0"]', ['1–0', '2–0'])).toBe(true);
    expect(matchAnswerExact(' ["1–0"]', ['1–0', '2–0'])).toBe(false);
    expect(matchAnswerExact(' [1, 2]', ['1', '2'])).toBe(false); // ints never equal strs in a set
  });

  test('a bare string answer is split into characters, as list() does', () => {
    expect(matchAnswerExact(' "Giza"', ['Giza'])).toBe(false);
  });

  test('thousands separators and percent signs are not forgiven', () => {
    expect(matchAnswerExact(' ["1,234"]', ['1234'])).toBe(false);
    expect(matchAnswerExact(' ["12%"]', ['12'])).toBe(false);
  });

  test('an unreadable answer is compared as its raw text', () => {
    expect(matchAnswerExact(' [Giza]', ['Giza'])).toBe(false);
    expect(matchAnswerExact('', [''])).toBe(true);
  });
});

describe('normalized matching (the later function-calling version)', () => {
  test('percent signs and thousands separators are removed', () => {
    expect(matchAnswerNormalized('["12%"]', ['12'])).toBe(true);
    expect(matchAnswerNormalized('["1,234"]', ['1234'])).toBe(true);
  });

  test('floats are equal within 0.01', () => {
    expect(matchAnswerNormalized('["3.005"]', ['3'])).toBe(true);
    expect(matchAnswerNormalized('["3.02"]', ['3'])).toBe(false);
    expect(matchAnswerNormalized('[1.0, 2.004]', ['2', '1'])).toBe(true);
    expect(matchAnswerNormalized('[1.0, 2.5]', ['2', '1'])).toBe(false);
  });

  test('several items compare as sets', () => {
    expect(matchAnswerNormalized('["b", "a"]', ['a', 'b'])).toBe(true);
    expect(matchAnswerNormalized('["a"]', ['a', 'b'])).toBe(false);
  });

  test('null-ish words and the empty string all mean "0"', () => {
    expect(normalizedAnswerItems('["None", "null", "", "NaN"]')).toEqual(['0', '0', '0', '0']);
    expect(matchAnswerNormalized('["None"]', ['none'])).toBe(true);
  });

  test('a pasted MySQL result counts by its single-value rows', () => {
    expect(matchAnswerNormalized("[('a',), ('b',)]", ['a', 'b'])).toBe(true);
    expect(matchAnswerNormalized('[(293.0,)]', ['293'])).toBe(true);
  });

  test('unquoted items are split on commas outside quotes', () => {
    expect(normalizedAnswerItems('[Giza, Cairo]')).toEqual(['Giza', 'Cairo']);
    expect(matchAnswerNormalized('[Giza]', ['Giza'])).toBe(true);
  });

  test('a plain answer is one item, quotes and spaces stripped', () => {
    expect(matchAnswerNormalized(' "Giza" ', ['Giza'])).toBe(true);
    expect(matchAnswerNormalized(' Giza', ['Giza'])).toBe(true);
  });

  test('case still matters', () => {
    expect(matchAnswerNormalized('["giza"]', ['Giza'])).toBe(false);
  });
});

describe('the table hash query', () => {
  test('is AgentBench md5 over sorted 5-digit row hashes, identifiers quoted', () => {
    const table = {
      table_name: 'Game `Schedule`',
      table_info: {
        columns: [
          { name: 'Game', type: 'TEXT' },
          { name: 'Nr.', type: 'INT' },
        ],
        rows: [],
      },
    };
    expect(tableHashQuery(table)).toBe(
      "select md5(group_concat(rowhash order by rowhash)) as hash from( SELECT substring(MD5(CONCAT_WS(',', `Game`,`Nr.`)), 1, 5) AS rowhash FROM `Game ``Schedule```) as sub;",
    );
  });
});

describe('scoring an episode', () => {
  const query: EpisodeScoreInput = {
    type: 'counting',
    label: ['3'],
    ending: 'answer',
    answer: ' ["3"]',
    lastStatementFailed: false,
    matching: 'exact',
  };
  const update: EpisodeScoreInput = {
    type: 'UPDATE',
    label: ['UPDATE t SET a = 1'],
    answerMd5: "[('abc',)]",
    ending: 'answer',
    answer: ' []',
    tableHash: "[('abc',)]",
    lastStatementFailed: false,
    matching: 'exact',
  };

  test('a correct answer scores 1 with no failure type', () => {
    expect(scoreEpisode(query)).toEqual({ correct: true, reward: 1, failureType: null, status: 'completed', answer: ' ["3"]' });
  });

  test('a wrong answer is wrong_answer', () => {
    expect(scoreEpisode({ ...query, answer: ' ["4"]' }).failureType).toBe('wrong_answer');
  });

  test('a wrong answer right after a failed statement is execution_error', () => {
    expect(scoreEpisode({ ...query, answer: ' ["4"]', lastStatementFailed: true }).failureType).toBe('execution_error');
  });

  test('a format error is format_error and the answer is empty', () => {
    expect(scoreEpisode({ ...query, ending: 'invalid', answer: undefined })).toMatchObject({
      correct: false,
      failureType: 'format_error',
      status: 'agent_validation_failed',
      answer: '',
    });
  });

  test('running out of turns is turn_limit', () => {
    expect(scoreEpisode({ ...query, ending: 'turn_limit', answer: undefined })).toMatchObject({
      failureType: 'turn_limit',
      status: 'task_limit_reached',
    });
  });

  test('DML is judged by the table hash, whatever was answered', () => {
    expect(scoreEpisode(update)).toMatchObject({ correct: true, answer: "[('abc',)]" });
    expect(scoreEpisode({ ...update, tableHash: "[('abd',)]" })).toMatchObject({ correct: false, failureType: 'wrong_answer' });
  });

  test('as in AgentBench, a DML episode ending in a format error still scores by its table', () => {
    expect(scoreEpisode({ ...update, ending: 'invalid', answer: undefined })).toMatchObject({
      correct: true,
      status: 'agent_validation_failed',
    });
  });

  test('a DML answer table that was not hashed is a wrong answer, its reason recorded, even after a failed statement', () => {
    expect(
      scoreEpisode({ ...update, tableHash: undefined, tableRefused: "'t' is a VIEW, not a base table", lastStatementFailed: true }),
    ).toEqual({
      correct: false,
      reward: 0,
      failureType: 'wrong_answer',
      status: 'completed',
      answer: "(not hashed: 't' is a VIEW, not a base table)",
    });
  });

  test('an episode ended by a sandbox cap is an execution_error that reached a task limit', () => {
    expect(scoreEpisode({ ...update, tableHash: undefined, ending: 'resource_limit' })).toMatchObject({
      correct: false,
      failureType: 'execution_error',
      status: 'task_limit_reached',
    });
  });

  test('an episode the sandbox refused is a wrong answer whatever its table or answer, the refusal recorded as the answer', () => {
    const refusal = "table 'c' is stored by CSV, which the sandbox does not allow (only InnoDB, MyISAM, Aria)";
    const expected = {
      correct: false,
      reward: 0,
      failureType: 'wrong_answer',
      status: 'agent_invalid_action',
      answer: `(not scored: ${refusal})`,
    };
    // A table that would have hashed to the right answer, and a query answer that matches its label, count for nothing.
    expect(scoreEpisode({ ...update, ending: 'refused', refusal })).toEqual(expected);
    expect(scoreEpisode({ ...query, ending: 'refused', refusal })).toEqual(expected);
  });

  test('normalized matching applies to queries when chosen', () => {
    expect(scoreEpisode({ ...query, answer: ' ["3.001"]' }).correct).toBe(false);
    expect(scoreEpisode({ ...query, answer: ' ["3.001"]', matching: 'normalized' }).correct).toBe(true);
  });
});

describe("AgentBench's per-type metrics", () => {
  const results = [
    { type: 'counting', correct: true },
    { type: 'counting', correct: false },
    { type: 'ranking', correct: true },
    { type: 'INSERT', correct: true },
    { type: 'INSERT', correct: true },
    { type: 'UPDATE', correct: false },
    { type: 'DELETE', correct: true },
  ];

  test('every v0.2 key is reported, a type without tasks as 0', () => {
    const { metrics } = agentBenchReport(results);
    expect(Object.keys(metrics)).toEqual([
      'other_accuracy',
      'counting_accuracy',
      'comparison_accuracy',
      'ranking_accuracy',
      'aggregation-SUM_accuracy',
      'aggregation-MIN_accuracy',
      'aggregation-MAX_accuracy',
      'aggregation-AVG_accuracy',
      'SELECT_accuracy',
      'INSERT_accuracy',
      'UPDATE_accuracy',
      'overall_cat_accuracy',
    ]);
    expect(metrics.counting_accuracy).toBe(0.5);
    expect(metrics.other_accuracy).toBe(0);
  });

  test('SELECT is every type but INSERT and UPDATE, DELETE included, as v0.2 groups it', () => {
    const select = agentBenchReport(results).byType.find((r) => r.type === 'SELECT');
    expect(select).toEqual({ type: 'SELECT', total: 4, passed: 3, accuracy: 0.75 });
  });

  test('overall_cat_accuracy is the mean of SELECT, INSERT and UPDATE accuracy', () => {
    expect(agentBenchReport(results).metrics.overall_cat_accuracy).toBeCloseTo((0.75 + 1 + 0) / 3);
  });

  test('types outside v0.2 keys get their own row', () => {
    expect(agentBenchReport(results).byType.at(-1)).toEqual({ type: 'DELETE', total: 1, passed: 1, accuracy: 1 });
  });
});
