import {
  AGENTBENCH_SYSTEM_PROMPT,
  agentBenchAnswerItems,
  agentBenchOpening,
  agentBenchTaskPrompt,
  agentBenchTurnBudget,
  parseAgentBenchAction,
  parseFinalAnswer,
} from '../../core/envs/dbbench/agentbench-protocol';
import { MYSQL_TYPES, mysqlValueToPy } from '../../core/envs/dbbench/mysql-values';
import { cutObservation, rowsObservation, rowsText, sqlErrorObservation } from '../../core/envs/dbbench/observation';
import { parsePythonLiteral } from '../../core/envs/dbbench/python-literal';
import { py, pyFloat, pyRepr, type PyValue } from '../../core/envs/dbbench/python-values';

const s = py.str;
const f = py.float;
const i = py.int;
const obj = (repr: string): PyValue => ({ type: 'object', repr, str: repr });

describe('the AgentBench instruction and first message', () => {
  test('the instruction is AgentBench v0.2 big_prompt, leading and trailing newline included', () => {
    expect(AGENTBENCH_SYSTEM_PROMPT.startsWith('\nI will ask you a question, then you should help me operate a MySQL database')).toBe(true);
    expect(AGENTBENCH_SYSTEM_PROMPT).toContain('Action: Operation\n```sql\nSELECT * FROM table WHERE condition;\n```\n');
    expect(AGENTBENCH_SYSTEM_PROMPT).toContain('Action: Answer\nFinal Answer: ["ANSWER1", "ANSWER2", ...]\n');
    expect(AGENTBENCH_SYSTEM_PROMPT.endsWith('Your input will be raw MySQL response, you have to deal with it by yourself.\n')).toBe(true);
  });

  test('the first user message is the description, a newline, and the table description', () => {
    const task = { description: 'How many?', add_description: 'The name of this table is T, and the headers of this table are a,b.' };
    expect(agentBenchTaskPrompt(task)).toBe('How many?\nThe name of this table is T, and the headers of this table are a,b.');
    expect(agentBenchOpening(task).map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(agentBenchOpening(task)[1].content).toBe('Ok.');
  });

  test('15 rounds give 16 assistant turns: the last may only answer', () => {
    expect(agentBenchTurnBudget()).toBe(16);
  });
});

describe('reading an assistant message', () => {
  test('an operation executes the first sql block, stripped', () => {
    const text = 'Let me look.\nAction: Operation\n```sql\n  SELECT * FROM `T`;  \n```\nand\n```sql\nDROP TABLE T\n```';
    expect(parseAgentBenchAction(text)).toEqual({ kind: 'sql', sql: 'SELECT * FROM `T`;' });
  });

  test('multi-line SQL is joined with spaces, as AgentBench replaces newlines', () => {
    const text = 'Action: Operation\n```sql\nSELECT a\nFROM t\nWHERE b = 1\n```';
    expect(parseAgentBenchAction(text)).toEqual({ kind: 'sql', sql: 'SELECT a FROM t WHERE b = 1' });
  });

  test('an operation without a ```sql block is a format error', () => {
    expect(parseAgentBenchAction('Action: Operation\nSELECT 1;\n').kind).toBe('invalid');
    expect(parseAgentBenchAction('Action: Operation\n```\nSELECT 1\n```').kind).toBe('invalid');
    // The block must open with ```sql and a newline, and close on a line of its own.
    expect(parseAgentBenchAction('Action: Operation\n```sql SELECT 1```').kind).toBe('invalid');
  });

  test('a message with neither an action line nor a Final Answer line is a format error', () => {
    const parsed = parseAgentBenchAction('I think the answer is 5.');
    expect(parsed).toEqual({ kind: 'invalid', reason: expect.stringContaining('no "Action:" line') });
  });

  test('the action line needs its newline and the exact word Operation', () => {
    expect(parseAgentBenchAction('Action: Operation').kind).toBe('invalid');
    expect(parseAgentBenchAction('Action: Operation \n```sql\nSELECT 1\n```').kind).toBe('invalid');
    expect(parseAgentBenchAction('Action: Operation\r\n```sql\nSELECT 1\n```').kind).toBe('invalid');
  });

  test('an answer is the rest of the line after "Final Answer:", leading space kept', () => {
    expect(parseAgentBenchAction('Action: Answer\nFinal Answer: ["a", "b"]\nThanks')).toEqual({ kind: 'answer', raw: ' ["a", "b"]' });
  });

  test('as in AgentBench, a Final Answer line counts without an Answer action line', () => {
    expect(parseAgentBenchAction('Done.\nFinal Answer: ["x"]')).toEqual({ kind: 'answer', raw: ' ["x"]' });
    expect(parseAgentBenchAction('Action: Finish\nFinal Answer: ["x"]')).toEqual({ kind: 'answer', raw: ' ["x"]' });
  });

  test('"Final Answer:" must follow a newline', () => {
    expect(parseAgentBenchAction('Final Answer: ["x"]').kind).toBe('invalid');
    expect(parseFinalAnswer('Final Answer: ["x"]')).toBeNull();
  });

  test('an operation wins over a Final Answer in the same message', () => {
    expect(parseAgentBenchAction('Action: Operation\n```sql\nSELECT 1\n```\nFinal Answer: ["1"]').kind).toBe('sql');
  });
});

describe('the answer list AgentBench scores: list(eval(answer)), else [answer]', () => {
  test('a list literal is its items', () => {
    expect(agentBenchAnswerItems(' ["March 19, 1998"]')).toEqual([s('March 19, 1998')]);
    expect(agentBenchAnswerItems(" ['a', 2, 3.5, None]")).toEqual([s('a'), i(2), f(3.5), py.none]);
  });

  test('a bare string literal becomes its characters, as list("abc") does', () => {
    expect(agentBenchAnswerItems(' "ab"')).toEqual([s('a'), s('b')]);
  });

  test('a number or an unknown name falls back to the raw text', () => {
    expect(agentBenchAnswerItems(' 17')).toEqual([s(' 17')]);
    expect(agentBenchAnswerItems(' [Dover]')).toEqual([s(' [Dover]')]);
    expect(agentBenchAnswerItems('')).toEqual([s('')]);
  });
});

describe('Python literals as eval reads them', () => {
  const cases: Array<[string, string | null]> = [
    [' ["a"]\r', "['a']"],
    ['\t[1]', '[1]'],
    ['[1,]', '[1]'],
    ['(1)', '1'],
    ['(1,)', '(1,)'],
    ['1, 2', '(1, 2)'],
    ['{1: 2}', '{1: 2}'],
    ['{1, 1.0, True}', '{1}'],
    ['["a" "b"]', "['ab']"],
    ['[r"\\d"]', "['\\\\d']"],
    ['[-1, +2.5, - -3]', '[-1, 2.5, 3]'],
    ['[1_000, 0x1F, 00]', '[1000, 31, 0]'],
    ['[01]', null],
    ['[1e3, .5, 5.]', '[1000.0, 0.5, 5.0]'],
    ['[None, True]', '[None, True]'],
    ['[abc]', null],
    ['["\\x41\\u00e9\\101"]', "['AéA']"],
    ['[b"x"]', "[b'x']"],
    ['[1] # note', '[1]'],
    ['', null],
    ['[1]]', null],
    ['["a"] and more', null],
  ];
  test.each(cases)('eval(%j) gives %s', (text, expected) => {
    const value = parsePythonLiteral(text);
    expect(value === null ? null : pyRepr(value)).toBe(expected);
  });
});

describe("Python's float()", () => {
  test.each([
    ['1_000', 1000],
    [' 1.5 ', 1.5],
    ['1e3', 1000],
    ['-Infinity', -Infinity],
    ['.5', 0.5],
    ['5.', 5],
    ['١٢', 12],
    ['1__0', null],
    ['_1', null],
    ['1,000', null],
    ['0x10', null],
  ])('float(%j) is %s', (text, expected) => {
    expect(pyFloat(s(text))).toBe(expected);
  });
});

describe('observations: str() of the fetched rows, as Python prints them', () => {
  // Ground truth: python3 -c 'print(repr(str(rows)))' for the same values.
  test('strings: quote choice, escapes, printable and non-printable characters', () => {
    const rows = [
      [s('a')],
      [s("it's")],
      [s('say "hi"')],
      [s(`both ' and "`)],
      [s('back\\slash')],
      [s('tab\tnl\nret\r')],
      [s('\x00\x1f\x7f')],
      [s('é ü 中文 😀')],
      [s('\xa0\u200b\u2028\x85')],
      [s('\u{e0001}')],
    ];
    expect(rowsText(rows)).toBe(
      `[('a',), ("it's",), ('say "hi"',), ('both \\' and "',), ('back\\\\slash',), ('tab\\tnl\\nret\\r',), ('\\x00\\x1f\\x7f',), ('é ü 中文 😀',), ('\\xa0\\u200b\\u2028\\x85',), ('\\U000e0001',)]`,
    );
  });

  test('numbers and None: ints, shortest float reprs, exponents', () => {
    const rows = [
      [i(1), f(2), py.none],
      [f(2011)],
      [f(1e16)],
      [f(1.5e-5)],
      [f(0.0001)],
      [f(123456789012345680)],
      [f(0.1 + 0.2)],
      [f(-0)],
      [f(Infinity)],
      [f(NaN)],
    ];
    expect(rowsText(rows)).toBe(
      '[(1, 2.0, None), (2011.0,), (1e+16,), (1.5e-05,), (0.0001,), (1.2345678901234568e+17,), (0.30000000000000004,), (-0.0,), (inf,), (nan,)]',
    );
  });

  test('an empty result is [], an empty row ()', () => {
    expect(rowsObservation([])).toBe('[]');
    expect(rowsText([[]])).toBe('[()]');
  });

  test('column values convert as mysql-connector converts them', () => {
    const T = MYSQL_TYPES;
    const value = (text: string | null, columnType: number, characterSet = 63) =>
      mysqlValueToPy(text === null ? null : Buffer.from(text, 'latin1'), { columnType, characterSet });
    const row = [
      value('2011', T.DOUBLE),
      value('3', T.LONGLONG),
      value('1.50', T.NEWDECIMAL),
      value('0.0000001', T.NEWDECIMAL),
      value('0.0000000', T.NEWDECIMAL),
      value('-0.30', T.NEWDECIMAL),
      value(null, T.BLOB, 224),
      value('2020-01-02', T.DATE),
      value('2020-01-02 03:04:05.5', T.DATETIME),
      value('2020-01-02 00:00:00', T.DATETIME),
      value('-01:30:00', T.TIME),
      value('00:00:00', T.TIME),
      value('838:59:59', T.TIME),
      value('x', T.VAR_STRING),
      mysqlValueToPy(Buffer.from('Vitória', 'utf8'), { columnType: T.BLOB, characterSet: 224 }),
    ];
    expect(rowsText([row])).toBe(
      "[(2011.0, 3, Decimal('1.50'), Decimal('1E-7'), Decimal('0E-7'), Decimal('-0.30'), None, datetime.date(2020, 1, 2), " +
        'datetime.datetime(2020, 1, 2, 3, 4, 5, 500000), datetime.datetime(2020, 1, 2, 0, 0), datetime.timedelta(days=-1, seconds=81000), ' +
        "datetime.timedelta(0), datetime.timedelta(days=34, seconds=82799), b'x', 'Vitória')]",
    );
  });

  test('bytes print as Python bytes', () => {
    expect(
      rowsText([[{ type: 'bytes', value: Buffer.from("it's \x00\xff\n", 'latin1') }], [{ type: 'bytes', value: Buffer.from(`'"`) }]]),
    ).toBe(`[(b"it's \\x00\\xff\\n",), (b'\\'"',)]`);
  });

  test('objects print by their repr inside rows', () => {
    expect(rowsText([[obj("Decimal('1')")]])).toBe("[(Decimal('1'),)]");
  });
});

describe('the 800-character cut', () => {
  test('text of 800 characters is left whole', () => {
    expect(cutObservation('x'.repeat(800))).toBe('x'.repeat(800));
  });

  test('longer text keeps its first 800 characters and gets [TRUNCATED]', () => {
    expect(cutObservation('x'.repeat(801))).toBe(`${'x'.repeat(800)}[TRUNCATED]`);
  });

  test('characters are counted as Python counts them (code points, not UTF-16 units)', () => {
    const emoji = '😀'.repeat(800);
    expect(cutObservation(emoji)).toBe(emoji);
    expect(cutObservation(`${emoji}a`)).toBe(`${emoji}[TRUNCATED]`);
  });

  test('a long result is cut after its repr is built', () => {
    const rows = Array.from({ length: 200 }, (_, n) => [s(`row-${n}`)]);
    const text = rowsObservation(rows);
    expect(text).toHaveLength(811);
    expect(text.startsWith("[('row-0',), ('row-1',)")).toBe(true);
    expect(text.endsWith('[TRUNCATED]')).toBe(true);
  });
});

describe('SQL errors print as mysql-connector prints them', () => {
  test('errno, SQLSTATE and message', () => {
    expect(sqlErrorObservation({ errno: 1146, sqlState: '42S02', message: "Table 'T.x' doesn't exist" })).toBe(
      "1146 (42S02): Table 'T.x' doesn't exist",
    );
  });

  test('without a SQLSTATE, errno and message', () => {
    expect(sqlErrorObservation({ errno: 2013, message: 'Lost connection' })).toBe('2013: Lost connection');
  });

  test('errors are cut at 800 characters too', () => {
    expect(sqlErrorObservation({ errno: 1064, sqlState: '42000', message: 'y'.repeat(900) })).toHaveLength(811);
  });
});
