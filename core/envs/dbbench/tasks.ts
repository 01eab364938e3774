/**
 * AgentBench DBBench tasks: one JSON object per line of a JSONL file
 * (data/dbbench/*.jsonl in THUDM/AgentBench), validated line by line.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { formatZodError } from '../../zod-errors';
import { UserError } from '../../errors';

/** Types whose answer is the table after the episode, scored by its md5 (AgentBench's DML set). */
export const DML_TYPES = ['INSERT', 'UPDATE', 'DELETE'] as const;
export type DmlType = (typeof DML_TYPES)[number];

export function isDmlType(type: string): type is DmlType {
  return (DML_TYPES as readonly string[]).includes(type);
}

/** A cell as AgentBench passes it to the driver: mostly strings, some numbers. */
const Cell = z.union([z.string(), z.number(), z.boolean(), z.null()]);

export const DbBenchColumn = z.looseObject({
  /** Kept as given, even where MySQL refuses it (one dev task has an empty name): AgentBench then runs the episode without its table. */
  name: z.string(),
  /** The type the source dataset names; AgentBench creates every column as TEXT regardless. */
  type: z.string(),
});

export const DbBenchTable = z.looseObject({
  table_name: z.string().min(1),
  table_info: z.looseObject({
    columns: z.array(DbBenchColumn).min(1, 'a table needs at least one column'),
    rows: z.array(z.array(Cell)),
  }),
});
export type DbBenchTable = z.infer<typeof DbBenchTable>;

export const DbBenchTaskLine = z
  .looseObject({
    description: z.string().min(1),
    /** Queries: the expected answer items. DML: the gold SQL statement. */
    label: z.array(Cell),
    table: DbBenchTable,
    /** One element: INSERT, UPDATE, DELETE, or a query type (other, counting, ranking, aggregation-SUM, ...). */
    type: z.tuple([z.string().min(1)]),
    add_description: z.string(),
    /** DML only: str() of the md5 query's rows after the gold SQL, e.g. "[('09aa...',)]". */
    answer_md5: z.string().optional(),
    heads: z.array(z.string()).optional(),
    source: z.string().optional(),
    create: z.looseObject({}).optional(),
  })
  .superRefine((line, ctx) => {
    const width = line.table.table_info.columns.length;
    line.table.table_info.rows.forEach((row, i) => {
      if (row.length !== width) {
        ctx.addIssue({
          code: 'custom',
          path: ['table', 'table_info', 'rows', i],
          message: `has ${row.length} cells; the table has ${width} columns`,
        });
      }
    });
    if (isDmlType(line.type[0]) && line.answer_md5 === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['answer_md5'],
        message: `required for ${line.type[0]} tasks (their score is the table's md5)`,
      });
    }
  });
export type DbBenchTaskLine = z.infer<typeof DbBenchTaskLine>;

/**
 * The router's category: DML tasks by their type; every query type
 * (other, counting, comparison, ranking, aggregation-*) grouped as SELECT,
 * the grouping of AgentBench's overall_cat_accuracy.
 */
export type DbBenchKind = 'SELECT' | DmlType;

export interface DbBenchTask {
  /** `dbbench-<index>`: the task's 0-based position in the file (AgentBench's sample index). */
  taskId: string;
  kind: DbBenchKind;
  /** AgentBench's fine type (type[0]), the key of its per-type table. */
  type: string;
  /** 1-based line number in the source file. */
  line: number;
  entry: DbBenchTaskLine;
}

export class DbBenchTaskFileError extends UserError {
  override name = 'DbBenchTaskFileError';
}

export function dbBenchTaskId(index: number): string {
  return `dbbench-${String(index).padStart(3, '0')}`;
}

export function dbBenchKind(type: string): DbBenchKind {
  return isDmlType(type) ? type : 'SELECT';
}

/** Parses JSONL text; every bad line is reported (file, line number, field path) and nothing is returned half-loaded. */
export function parseDbBenchTasks(text: string, file: string): DbBenchTask[] {
  const tasks: DbBenchTask[] = [];
  const problems: string[] = [];
  text.split('\n').forEach((rawLine, i) => {
    const line = i + 1;
    if (rawLine.trim() === '') return;
    let json: unknown;
    try {
      json = JSON.parse(rawLine);
    } catch (err) {
      problems.push(`${file}:${line}: not valid JSON (${(err as Error).message})`);
      return;
    }
    const parsed = DbBenchTaskLine.safeParse(json);
    if (!parsed.success) {
      problems.push(`${file}:${line}: not a DBBench task:\n${formatZodError(parsed.error)}`);
      return;
    }
    const type = parsed.data.type[0];
    tasks.push({ taskId: dbBenchTaskId(tasks.length + problems.length), kind: dbBenchKind(type), type, line, entry: parsed.data });
  });
  if (problems.length > 0) {
    throw new DbBenchTaskFileError(
      `DBBench task file ${file} has ${problems.length} bad line(s); fix them and load again:\n${problems.join('\n')}`,
    );
  }
  if (tasks.length === 0) throw new DbBenchTaskFileError(`DBBench task file ${file} has no tasks`);
  return tasks;
}

export function loadDbBenchTasks(file: string): DbBenchTask[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new DbBenchTaskFileError(`cannot read DBBench task file ${file}: ${(err as Error).message}`);
  }
  return parseDbBenchTasks(text, file);
}
