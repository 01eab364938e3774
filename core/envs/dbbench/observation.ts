/**
 * What AgentBench shows the agent after a statement: Python's `str()` of the
 * rows mysql-connector fetched (or of its error), cut at 800 characters.
 */
import { pyRepr, type PyValue } from './python-values';

export const OBSERVATION_MAX_CHARS = 800;
export const TRUNCATION_MARK = '[TRUNCATED]';

/** AgentBench's cut: over 800 characters (code points), the first 800 and "[TRUNCATED]". */
export function cutObservation(text: string): string {
  if (text.length <= OBSERVATION_MAX_CHARS) return text;
  const codePoints = Array.from(text);
  if (codePoints.length <= OBSERVATION_MAX_CHARS) return text;
  return codePoints.slice(0, OBSERVATION_MAX_CHARS).join('') + TRUNCATION_MARK;
}

/** repr of one fetched row: a tuple. */
export function rowRepr(row: readonly PyValue[]): string {
  return pyRepr({ type: 'tuple', items: [...row] });
}

/** `str(cursor.fetchall())` before the cut: a list of tuples. */
export function rowsText(rows: readonly (readonly PyValue[])[]): string {
  return `[${rows.map(rowRepr).join(', ')}]`;
}

/** The observation after a statement: the fetched rows, or `[]` when it returns none. */
export function rowsObservation(rows: readonly (readonly PyValue[])[]): string {
  return cutObservation(rowsText(rows));
}

/** A server error as mysql-connector's str(error) prints it: `1146 (42S02): Table 'x.y' doesn't exist`. */
export function sqlErrorText(error: { errno?: number | null; sqlState?: string | null; message: string }): string {
  if (error.errno === undefined || error.errno === null || error.errno === -1) return error.message;
  return error.sqlState ? `${error.errno} (${error.sqlState}): ${error.message}` : `${error.errno}: ${error.message}`;
}

export function sqlErrorObservation(error: { errno?: number | null; sqlState?: string | null; message: string }): string {
  return cutObservation(sqlErrorText(error));
}
