/**
 * AgentBench's DBBench scoring. DML tasks (INSERT, UPDATE, DELETE) are judged
 * by the table after the episode: an md5 over the sorted row hashes, computed
 * on the server and printed as the driver prints rows, against answer_md5.
 * Queries are judged by their final answer, in two modes:
 * - `exact`: v0.2's metric: `list(eval(answer))` (or `[answer]`), then one
 *   item against one label as floats or else as values, several as sets.
 * - `normalized`: the later function-calling version's comparison: items
 *   cleaned of quotes, `%` and thousands separators, null-ish words as "0",
 *   floats equal within 0.01, several items as sets (floats matched pairwise).
 */
import type { FailureType } from '../../policy/trajectory';
import { agentBenchAnswerItems } from './agentbench-protocol';
import { parsePythonLiteral } from './python-literal';
import { pyEquals, pyFloat, pySetEquals, pyStr, pythonStrip, type PyValue } from './python-values';
import { isDmlType, type DbBenchTable } from './tasks';

export type AnswerMatching = 'exact' | 'normalized';

/**
 * How an episode ended: a final answer, a format error (AgentBench ends the
 * episode there), the turn limit, its database outgrowing a sandbox cap, or
 * its database holding what the sandbox refuses (a table of an engine it
 * does not allow).
 */
export type EpisodeEnding = 'answer' | 'invalid' | 'turn_limit' | 'resource_limit' | 'refused';

/** AgentBench's SampleStatus for the ending. */
export type AgentBenchStatus = 'completed' | 'agent_validation_failed' | 'agent_invalid_action' | 'task_limit_reached';

export type LabelCell = string | number | boolean | null;

function quoteId(name: string): string {
  return `\`${name.replace(/`/g, '``')}\``;
}

/**
 * AgentBench's table hash: the first 5 hex digits of md5 over each row's
 * values joined by ',' (CONCAT_WS skips NULLs), sorted, joined by ',' (GROUP_CONCAT,
 * whose 1024-byte default on MySQL 8 is part of the reference), then md5.
 */
export function tableHashQuery(table: DbBenchTable): string {
  const columns = table.table_info.columns.map((c) => quoteId(c.name)).join(',');
  return (
    `select md5(group_concat(rowhash order by rowhash)) as hash ` +
    `from( SELECT substring(MD5(CONCAT_WS(',', ${columns})), 1, 5) AS rowhash FROM ${quoteId(table.table_name)}) as sub;`
  );
}

export function labelToPy(cell: LabelCell): PyValue {
  if (cell === null) return { type: 'none' };
  if (typeof cell === 'string') return { type: 'str', value: cell };
  if (typeof cell === 'boolean') return { type: 'bool', value: cell };
  return Number.isInteger(cell) ? { type: 'int', value: BigInt(cell) } : { type: 'float', value: cell };
}

/**
 * v0.2's query metric. `raw` is the text after "Final Answer:" ('' when the
 * episode gave none). One answer item against one label: equal as floats when
 * both convert, else equal as values; otherwise the two sets must be equal.
 */
export function matchAnswerExact(raw: string, label: readonly LabelCell[]): boolean {
  const answer = agentBenchAnswerItems(raw);
  const expected = label.map(labelToPy);
  if (answer.length === 1 && expected.length === 1) {
    const a = pyFloat(answer[0]);
    const b = pyFloat(expected[0]);
    if (a !== null && b !== null) return a === b;
    return pyEquals(answer[0], expected[0]);
  }
  return pySetEquals(expected, answer) ?? false;
}

const SPECIAL_AS_ZERO = new Set(['none', 'null', 'undefined', 'nan', 'inf', 'infinity', '-inf', '-infinity', '']);
const QUOTES = `'"`;

/** One item's text, normalized: "12%" → "12", "1,234" → "1234", none/null/nan/"" → "0". */
export function normalizeAnswerItem(value: string): string {
  let text = pythonStrip(value);
  if (text.endsWith('%')) return pythonStrip(text.slice(0, -1));
  if (text.includes(',') && !text.startsWith('[') && !text.endsWith(']')) text = text.replace(/,/g, '');
  return SPECIAL_AS_ZERO.has(text.toLowerCase()) ? '0' : text;
}

function itemText(item: PyValue): string {
  const inner = item.type === 'tuple' && item.items.length === 1 ? item.items[0] : item;
  return pythonStrip(pythonStrip(pyStr(inner)), QUOTES);
}

/** A MySQL rows text like "[('a',), (2,)]" pasted as the answer: the single-value rows' values. */
function rowsTextItems(text: string): string[] | null {
  if (!(text.startsWith('[') && text.endsWith(']'))) return null;
  const value = parsePythonLiteral(text);
  if (value && value.type === 'list' && value.items.every((i) => i.type === 'tuple')) {
    return value.items.filter((i) => i.type === 'tuple' && i.items.length === 1).map(itemText);
  }
  const inner = text.replace(/^[[\]]+|[[\]]+$/g, '');
  if ((inner.match(/\(/g) ?? []).length === 1 && inner.startsWith('(') && inner.endsWith(',)')) {
    return [pythonStrip(pythonStrip(inner.slice(1, -2)), QUOTES)];
  }
  return null;
}

/**
 * The answer as a list of normalized item texts; null where the later
 * version's cleaning yields nothing comparable (a bracketed literal that is not a list).
 */
export function normalizedAnswerItems(answer: string | readonly LabelCell[]): string[] | null {
  if (typeof answer !== 'string') return answer.map((cell) => normalizeAnswerItem(itemText(labelToPy(cell))));
  const rows = rowsTextItems(answer);
  if (rows) return rows.map(normalizeAnswerItem);
  const text = pythonStrip(answer);
  if (!(text.startsWith('[') && text.endsWith(']'))) return [normalizeAnswerItem(pythonStrip(text, QUOTES))];
  const value = parsePythonLiteral(text);
  if (value) return value.type === 'list' ? value.items.map((item) => normalizeAnswerItem(itemText(item))) : null;
  // Not a Python literal: split on commas outside quotes; the quote characters themselves are dropped.
  const items: string[] = [];
  let current = '';
  let inQuotes = false;
  for (const ch of text.slice(1, -1)) {
    if (QUOTES.includes(ch)) inQuotes = !inQuotes;
    else if (ch === ',' && !inQuotes) {
      if (current) items.push(normalizeAnswerItem(pythonStrip(pythonStrip(current), QUOTES)));
      current = '';
    } else current += ch;
  }
  if (current) items.push(normalizeAnswerItem(pythonStrip(pythonStrip(current), QUOTES)));
  return items;
}

const FLOAT_TOLERANCE = 0.01;

function asFloat(text: string): number | null {
  return pyFloat({ type: 'str', value: text });
}

function floatsClose(a: string, b: string): boolean {
  const x = asFloat(a);
  const y = asFloat(b);
  return x !== null && y !== null && Math.abs(x - y) <= FLOAT_TOLERANCE;
}

/** The function-calling version's comparison of a query answer with its label. */
export function matchAnswerNormalized(answer: string, label: readonly LabelCell[]): boolean {
  const given = normalizedAnswerItems(pythonStrip(answer));
  const expected = normalizedAnswerItems(label);
  if (given === null || expected === null) return false;
  if (given.length === 1 && expected.length === 1) {
    const [a] = given;
    const [b] = expected;
    if (a === '0' && b === '0') return true;
    if (asFloat(a) !== null && asFloat(b) !== null) return floatsClose(a, b);
    return a === b;
  }
  if (given.every((x) => asFloat(x) !== null) && expected.every((x) => asFloat(x) !== null)) {
    if (given.length !== expected.length) return false;
    const used = expected.map(() => false);
    for (const a of given) {
      const i = expected.findIndex((b, j) => !used[j] && floatsClose(a, b));
      if (i < 0) return false;
      used[i] = true;
    }
    return used.every(Boolean);
  }
  const a = new Set(given);
  const b = new Set(expected);
  return a.size === b.size && [...a].every((x) => b.has(x));
}

export interface EpisodeScoreInput {
  /** AgentBench's type (type[0]). */
  type: string;
  label: readonly LabelCell[];
  answerMd5?: string;
  ending: EpisodeEnding;
  /** The text after "Final Answer:" when the episode ended with one. */
  answer?: string;
  /** DML: the table hash as printed after the episode (the md5 query's observation). */
  tableHash?: string;
  /** DML: why the answer table was not hashed (not a base table, too slow to hash...): a wrong answer. */
  tableRefused?: string;
  /** With the `refused` ending: what the sandbox refused. The episode is a wrong answer, whatever its table or answer. */
  refusal?: string;
  /** Whether the last SQL statement the agent ran failed with an error. */
  lastStatementFailed: boolean;
  matching: AnswerMatching;
}

export interface EpisodeScore {
  correct: boolean;
  reward: number;
  failureType: FailureType | null;
  status: AgentBenchStatus;
  /** What AgentBench records as the episode's answer: the table hash for DML, the Final Answer text otherwise. */
  answer: string;
}

const STATUS: Record<EpisodeEnding, AgentBenchStatus> = {
  answer: 'completed',
  invalid: 'agent_validation_failed',
  turn_limit: 'task_limit_reached',
  resource_limit: 'task_limit_reached',
  refused: 'agent_invalid_action',
};

/**
 * Scores one episode as AgentBench does. DML: the table decides, whatever the
 * ending (AgentBench hashes the table even after a format error or the turn
 * limit). Queries: the final answer under the chosen matching; an episode that
 * gave none is scored as v0.2 scores its empty answer.
 * An episode the sandbox refused (a table of an engine it does not allow) is
 * a wrong answer, recorded as `(not scored: <why>)`, whatever it answered.
 * A failed episode's failure type: its ending (a cap outgrown is an
 * `execution_error`, a refusal a `wrong_answer`), else `wrong_answer` for a
 * table that was not hashed, else `execution_error` when the last statement
 * it ran failed, else `wrong_answer`.
 */
export function scoreEpisode(input: EpisodeScoreInput): EpisodeScore {
  let correct: boolean;
  let answer: string;
  if (input.ending === 'refused') {
    answer = `(not scored: ${input.refusal ?? 'the sandbox refused the episode'})`;
    correct = false;
  } else if (isDmlType(input.type) && input.tableRefused !== undefined) {
    answer = `(not hashed: ${input.tableRefused})`;
    correct = false;
  } else if (isDmlType(input.type)) {
    answer = input.tableHash ?? '';
    correct = input.answerMd5 !== undefined && answer === input.answerMd5;
  } else {
    answer = input.ending === 'answer' ? (input.answer ?? '') : '';
    correct =
      input.ending === 'answer' && input.matching === 'normalized'
        ? matchAnswerNormalized(answer, input.label)
        : matchAnswerExact(answer, input.label);
  }
  let failureType: FailureType | null = null;
  if (!correct) {
    if (input.ending === 'invalid') failureType = 'format_error';
    else if (input.ending === 'turn_limit') failureType = 'turn_limit';
    else if (input.ending === 'resource_limit') failureType = 'execution_error';
    else if (input.ending === 'refused' || input.tableRefused !== undefined) failureType = 'wrong_answer';
    else failureType = input.lastStatementFailed ? 'execution_error' : 'wrong_answer';
  }
  return { correct, reward: correct ? 1 : 0, failureType, status: STATUS[input.ending], answer };
}

// ---------------------------------------------------------------------------
// AgentBench's per-type table

/** The accuracy keys v0.2 reports, in its order (each as `<type>_accuracy`). */
export const AGENTBENCH_METRIC_TYPES = [
  'other',
  'counting',
  'comparison',
  'ranking',
  'aggregation-SUM',
  'aggregation-MIN',
  'aggregation-MAX',
  'aggregation-AVG',
  'SELECT',
  'INSERT',
  'UPDATE',
] as const;

export interface ScoredTask {
  type: string;
  correct: boolean;
}

export interface TypeAccuracy {
  type: string;
  total: number;
  passed: number;
  /** passed / total; 0 when the type has no tasks, as v0.2 reports it. */
  accuracy: number;
}

/** v0.2's grouping: SELECT is every type but INSERT and UPDATE (DELETE included). */
function inMetric(metricType: string, taskType: string): boolean {
  if (metricType === 'SELECT') return taskType !== 'INSERT' && taskType !== 'UPDATE';
  return metricType === taskType;
}

function accuracyOf(metricType: string, results: readonly ScoredTask[]): TypeAccuracy {
  const members = results.filter((r) => inMetric(metricType, r.type));
  const passed = members.filter((r) => r.correct).length;
  return { type: metricType, total: members.length, passed, accuracy: members.length ? passed / members.length : 0 };
}

export interface AgentBenchReport {
  /** One row per v0.2 metric type, then any other type present (e.g. DELETE). */
  byType: TypeAccuracy[];
  /** v0.2's metrics object: `<type>_accuracy` for each metric type and `overall_cat_accuracy`. */
  metrics: Record<string, number>;
}

/** overall_cat_accuracy = mean of SELECT, INSERT and UPDATE accuracy. */
export function agentBenchReport(results: readonly ScoredTask[]): AgentBenchReport {
  const extra = [...new Set(results.map((r) => r.type))].filter((t) => !(AGENTBENCH_METRIC_TYPES as readonly string[]).includes(t)).sort();
  const byType = [...AGENTBENCH_METRIC_TYPES, ...extra].map((t) => accuracyOf(t, results));
  const metrics: Record<string, number> = {};
  for (const row of byType)
    if ((AGENTBENCH_METRIC_TYPES as readonly string[]).includes(row.type)) metrics[`${row.type}_accuracy`] = row.accuracy;
  metrics.overall_cat_accuracy = (metrics.SELECT_accuracy + metrics.INSERT_accuracy + metrics.UPDATE_accuracy) / 3;
  return { byType, metrics };
}
