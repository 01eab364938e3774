/**
 * One agent statement in its session: run under a time limit (the server's,
 * and a watchdog for what slips past it), its rows streamed and converted as
 * they arrive, reading stopped once the observation is decided or a result
 * cap is hit, and the session ended afterwards.
 */
import type { Connection as CoreConnection, FieldPacket } from 'mysql2';
import { mysqlValueToPy, type ColumnMeta } from './mysql-values';
import { OBSERVATION_MAX_CHARS, TRUNCATION_MARK, cutObservation, rowRepr } from './observation';
import { pythonLength } from './python-values';

export interface StatementLimits {
  /** Per-statement time limit (server-side, plus a watchdog that kills the session shortly after). */
  statementTimeMs: number;
  /** Fetching stops at this many rows... */
  maxResultRows: number;
  /** ...or this many bytes of row data; and in any case once the observation's 800 characters are decided. */
  maxResultBytes: number;
}

const WATCHDOG_GRACE_MS = 1000;

export interface SqlErrorInfo {
  errno?: number;
  sqlState?: string;
  message: string;
  /** Set when a sandbox limit, not the statement itself, ended it (or, for `size` and `refused`, ended the episode after it). */
  limit?: 'time' | 'size' | 'refused';
}

export interface StatementResult {
  /** What AgentBench would show the agent: the rows as Python prints them, `[]`, or the error; cut at 800 characters. */
  observation: string;
  /** `rows`: a non-empty result set; `empty`: no rows (or a statement without a result set); `error`. */
  outcome: 'rows' | 'empty' | 'error';
  error?: SqlErrorInfo;
  rowsFetched: number;
  bytesFetched: number;
  /** Fetching stopped before the end of the result (its observation was decided, or a cap was reached). */
  stoppedEarly: boolean;
  elapsedMs: number;
  /** Set when the episode's database outgrew a sandbox cap with this statement: what it outgrew. The episode ends. */
  capExceeded?: string;
  /** Set when this statement left a table of an engine the sandbox does not allow: which. The episode ends as a wrong answer. */
  refused?: string;
}

export function toErrorInfo(err: unknown): SqlErrorInfo {
  const e = err as { errno?: number; sqlState?: string; sqlMessage?: string; message?: string };
  if (typeof e.errno === 'number' && e.sqlMessage !== undefined) return { errno: e.errno, sqlState: e.sqlState, message: e.sqlMessage };
  return { message: e.message ?? String(err) };
}

/** Keeps the observation text as rows arrive, and knows when its first 800 characters are settled. */
class ObservationBuilder {
  private readonly parts: string[] = [];
  private length = 1; // "["
  rows = 0;
  bytes = 0;

  add(row: string, bytes: number): void {
    if (this.parts.length > 0) this.length += 2; // ", "
    this.parts.push(row);
    this.length += pythonLength(row);
    this.rows += 1;
    this.bytes += bytes;
  }

  /** Past 800 characters the cut text no longer depends on the rows still to come. */
  get decided(): boolean {
    return this.length > OBSERVATION_MAX_CHARS;
  }

  /** The observation; for a result read only in part, cut as the whole would have been (or marked, if a cap came first). */
  text(complete: boolean): string {
    const text = `[${this.parts.join(', ')}${complete ? ']' : ''}`;
    return complete || this.decided ? cutObservation(text) : text + TRUNCATION_MARK;
  }
}

interface StreamLimits {
  maxRows: number;
  maxBytes: number;
}

type StreamOutcome =
  { kind: 'rows'; observation: ObservationBuilder; stoppedEarly: boolean } | { kind: 'error'; error: unknown } | { kind: 'aborted' };

/**
 * Runs one statement and reads its result as rows of raw bytes, converting
 * each to a Python tuple as it arrives; stops reading (and says so) once the
 * observation is decided or a cap is hit. `abort()` settles it at once (the
 * driver reports nothing for a session it closes itself). The caller ends the
 * session afterwards.
 */
export function streamStatement(
  connection: CoreConnection,
  sql: string,
  limits: StreamLimits,
): { done: Promise<StreamOutcome>; abort: () => void } {
  let settle: (value: StreamOutcome) => void = () => undefined;
  let settled = false;
  const done = new Promise<StreamOutcome>((resolve) => {
    settle = (value) => {
      if (settled) return;
      settled = true;
      resolve(value);
    };
  });
  const observation = new ObservationBuilder();
  let columns: ColumnMeta[] | null = null;
  const query = connection.query({ sql, rowsAsArray: true, typeCast: (field) => field.buffer() });
  query.on('error', (error: unknown) => settle({ kind: 'error', error }));
  query.on('fields', (fields: FieldPacket[] | undefined) => {
    // A statement without a result set announces `undefined` fields.
    if (fields) columns = fields.map((f) => ({ columnType: f.columnType ?? f.type ?? 253, characterSet: f.characterSet ?? 0 }));
  });
  query.on('result', (row: unknown) => {
    if (settled || !columns || !Array.isArray(row)) return;
    const cells = row as Array<Buffer | null>;
    const meta = columns;
    const bytes = cells.reduce((n, cell) => n + (cell ? cell.length : 0), 0);
    observation.add(rowRepr(cells.map((cell, i) => mysqlValueToPy(cell, meta[i]))), bytes);
    if (observation.decided || observation.rows >= limits.maxRows || observation.bytes >= limits.maxBytes) {
      settle({ kind: 'rows', observation, stoppedEarly: true });
    }
  });
  query.on('end', () => settle({ kind: 'rows', observation, stoppedEarly: false }));
  return { done, abort: () => settle({ kind: 'aborted' }) };
}

export interface StatementRun {
  limits: StatementLimits;
  /** How the server words its time limit: the watchdog reports the same error. */
  timeLimitError: SqlErrorInfo;
  /** Ends a session server-side. */
  kill: (threadId: number | null | undefined) => void;
  /** When the statement was asked for, its session's connect included. */
  started: number;
  /** The result of a statement that ended in an error, as the episode words it. */
  errorResult: (error: SqlErrorInfo) => StatementResult;
}

/**
 * Runs one agent statement in `connection`, a fresh session, and ends the
 * session; a statement still running server-side (aborted, or read only in
 * part) is killed with it. SQL errors, the time limit's included, become the result.
 */
export async function runStatement(connection: CoreConnection, sql: string, run: StatementRun): Promise<StatementResult> {
  const statement = streamStatement(connection, sql, {
    maxRows: run.limits.maxResultRows,
    maxBytes: run.limits.maxResultBytes,
  });
  // The server enforces the limit itself; this catches what slips past it (SET STATEMENT ... FOR, MySQL's SELECT-only limit).
  const watchdog = setTimeout(statement.abort, run.limits.statementTimeMs + WATCHDOG_GRACE_MS);
  let unfinished = true;
  try {
    const result = await statement.done;
    unfinished = result.kind === 'aborted' || (result.kind === 'rows' && result.stoppedEarly);
    if (result.kind === 'aborted') return run.errorResult(run.timeLimitError);
    if (result.kind === 'error') return run.errorResult(toErrorInfo(result.error));
    const { observation, stoppedEarly } = result;
    return {
      observation: observation.text(!stoppedEarly),
      outcome: observation.rows > 0 ? 'rows' : 'empty',
      rowsFetched: observation.rows,
      bytesFetched: observation.bytes,
      stoppedEarly,
      elapsedMs: Date.now() - run.started,
    };
  } finally {
    clearTimeout(watchdog);
    // What still runs server-side (an aborted or half-read statement) ends with its session.
    if (unfinished) run.kill(connection.threadId);
    connection.destroy();
  }
}
