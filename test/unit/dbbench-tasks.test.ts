import path from 'node:path';
import { DbBenchTaskFileError, loadDbBenchTasks, parseDbBenchTasks } from '../../core/envs/dbbench/tasks';

const DEV_FILE = path.resolve(__dirname, '../../data/dbbench/dev.jsonl');

const query = {
  description: 'How many games?',
  label: ['3'],
  table: { table_name: 'Games', table_info: { columns: [{ name: 'Game', type: 'TEXT' }], rows: [['1'], ['2']] } },
  type: ['counting'],
  add_description: 'The name of this table is Games, and the headers of this table are Game.',
  extra_field: 'kept',
};
const insert = { ...query, type: ['INSERT'], label: ['INSERT INTO Games VALUES (3)'], answer_md5: "[('x',)]" };

const jsonl = (...lines: unknown[]) => lines.map((l) => JSON.stringify(l)).join('\n');

describe('loading DBBench tasks', () => {
  test('the dev split loads 60 tasks: 20 INSERT, 20 UPDATE, 20 grouped as SELECT', () => {
    const tasks = loadDbBenchTasks(DEV_FILE);
    expect(tasks).toHaveLength(60);
    const kinds = tasks.reduce<Record<string, number>>((n, t) => ({ ...n, [t.kind]: (n[t.kind] ?? 0) + 1 }), {});
    expect(kinds).toEqual({ SELECT: 20, INSERT: 20, UPDATE: 20 });
  });

  test('task ids follow the file order, the fine type is kept', () => {
    const tasks = parseDbBenchTasks(jsonl(query, insert), 'x.jsonl');
    expect(tasks.map((t) => [t.taskId, t.kind, t.type, t.line])).toEqual([
      ['dbbench-000', 'SELECT', 'counting', 1],
      ['dbbench-001', 'INSERT', 'INSERT', 2],
    ]);
  });

  test('unknown extra fields are allowed and kept', () => {
    expect(parseDbBenchTasks(jsonl(query), 'x.jsonl')[0].entry.extra_field).toBe('kept');
  });

  test('a bad line names the file, the line and the field, and nothing is loaded', () => {
    const bad = { ...query, table: { ...query.table, table_info: { ...query.table.table_info, rows: [['1', '2']] } } };
    expect(() => parseDbBenchTasks(jsonl(query, bad), 'tasks.jsonl')).toThrow(DbBenchTaskFileError);
    expect(() => parseDbBenchTasks(jsonl(query, bad), 'tasks.jsonl')).toThrow(
      /tasks\.jsonl:2: .*\n.*table\.table_info\.rows\.0: has 2 cells; the table has 1 columns/,
    );
  });

  test('a DML task without answer_md5 is refused', () => {
    const { answer_md5: _dropped, ...noMd5 } = insert;
    expect(() => parseDbBenchTasks(jsonl(noMd5), 'tasks.jsonl')).toThrow(/tasks\.jsonl:1: [\s\S]*answer_md5: required for INSERT tasks/);
  });

  test('type must be a one-element list', () => {
    expect(() => parseDbBenchTasks(jsonl({ ...query, type: ['counting', 'other'] }), 'tasks.jsonl')).toThrow(/tasks\.jsonl:1: [\s\S]*type/);
  });

  test('a line that is not JSON is named', () => {
    expect(() => parseDbBenchTasks(`${jsonl(query)}\n{oops`, 'tasks.jsonl')).toThrow(/tasks\.jsonl:2: not valid JSON/);
  });

  test('a missing file says which', () => {
    expect(() => loadDbBenchTasks('/nonexistent/dev.jsonl')).toThrow(/cannot read DBBench task file \/nonexistent\/dev\.jsonl/);
  });
});
