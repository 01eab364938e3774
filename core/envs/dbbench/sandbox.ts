/**
 * Per-episode isolation on a MySQL-compatible server (MariaDB or MySQL 8).
 * Each episode gets its own database and its own user, granted on that
 * database only, with a random password, a connection cap and a statement
 * time limit; the agent's SQL runs as that user, never as the admin. Names
 * carry a prefix and their creation time, so a sweeper can remove what a
 * dead worker left behind.
 *
 * Like AgentBench (which reconnects before every statement), each statement
 * runs in a fresh session: session state does not carry over between turns.
 */
import { randomBytes } from 'node:crypto';
import { createConnection, type Connection as CoreConnection, type ConnectionOptions, type FieldPacket } from 'mysql2';
import { createPool, type Pool, type RowDataPacket } from 'mysql2/promise';
import {
  OBSERVATION_MAX_CHARS,
  TRUNCATION_MARK,
  cutObservation,
  mysqlValueToPy,
  pythonLength,
  rowRepr,
  sqlErrorObservation,
  type ColumnMeta,
} from './protocol';
import type { DbBenchTable } from './tasks';

export const DEFAULT_DBBENCH_MYSQL_URL = 'mysql://root@127.0.0.1:3306';
export const DEFAULT_SANDBOX_PREFIX = 'hsdbb_';

export interface SandboxLimits {
  /** Per-statement time limit (server-side, plus a watchdog that kills the session shortly after). */
  statementTimeMs: number;
  /** MAX_USER_CONNECTIONS of the episode user. */
  maxUserConnections: number;
  /** Fetching stops at this many rows... */
  maxResultRows: number;
  /** ...or this many bytes of row data; and in any case once the observation's 800 characters are decided. */
  maxResultBytes: number;
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  statementTimeMs: 10_000,
  maxUserConnections: 2,
  maxResultRows: 10_000,
  maxResultBytes: 4 * 1024 * 1024,
};

export interface SandboxHostOptions {
  /** Admin connection, `mysql://user:password@host:port` (`?socketPath=...` for a socket). */
  adminUrl?: string;
  /** Prefix of every database and user the host creates: letters, digits and `_`. */
  prefix?: string;
  limits?: Partial<SandboxLimits>;
  /** sql_mode of the agent's sessions; cleared by default. */
  sqlMode?: string;
  /** Admin connections kept open for setup, teardown and kills. */
  adminPoolSize?: number;
}

export type ServerFlavor = 'mariadb' | 'mysql';

interface ServerAddress {
  host?: string;
  port?: number;
  socketPath?: string;
  user: string;
  password: string;
}

export class SandboxError extends Error {
  override name = 'SandboxError';
}

/** Reads a `mysql://` URL into connection settings; says what is wrong with a bad one. */
export function parseMysqlUrl(url: string): ServerAddress {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new SandboxError(`DBBench MySQL URL '${url}' is not a URL; expected mysql://user:password@host:port`);
  }
  if (parsed.protocol !== 'mysql:') throw new SandboxError(`DBBench MySQL URL '${url}' must start with mysql://`);
  if (!parsed.username) throw new SandboxError(`DBBench MySQL URL '${url}' names no user; expected mysql://user@host:port`);
  const socketPath = parsed.searchParams.get('socketPath') ?? undefined;
  return {
    host: socketPath ? undefined : parsed.hostname || '127.0.0.1',
    port: socketPath ? undefined : Number(parsed.port || 3306),
    socketPath,
    user: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
  };
}

function quoteId(name: string): string {
  return `\`${name.replace(/`/g, '``')}\``;
}

/** A database name as a GRANT pattern matching only itself (`_` and `%` are wildcards there). */
function grantDatabase(name: string): string {
  return quoteId(name.replace(/[_%\\]/g, (c) => `\\${c}`));
}

/** The privileges an episode user holds on its own database: everything but routines, events and grants. */
const EPISODE_PRIVILEGES = [
  'SELECT', 'INSERT', 'UPDATE', 'DELETE', 'CREATE', 'DROP', 'ALTER', 'INDEX', 'REFERENCES',
  'CREATE TEMPORARY TABLES', 'LOCK TABLES', 'CREATE VIEW', 'SHOW VIEW', 'TRIGGER',
].join(', ');

const COLLATION: Record<ServerFlavor, string> = {
  // The closest MariaDB has to MySQL 8's default utf8mb4_0900_ai_ci: UCA-based, accent- and case-insensitive, no padding.
  mariadb: 'utf8mb4_unicode_520_nopad_ci',
  mysql: 'utf8mb4_0900_ai_ci',
};

/** MySQL 8's default; MariaDB's is 1M. AgentBench's table hash and agents' GROUP_CONCATs ran under MySQL's. */
const GROUP_CONCAT_MAX_LEN = 1024;

const WATCHDOG_GRACE_MS = 1000;
const ER_TOO_MANY_USER_CONNECTIONS = 1226;
const ER_ACCESS_DENIED = 1045;

export interface SqlErrorInfo {
  errno?: number;
  sqlState?: string;
  message: string;
  /** Set when a sandbox limit, not the statement itself, ended it. */
  limit?: 'time';
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
}

function timeLimitError(flavor: ServerFlavor): SqlErrorInfo {
  return flavor === 'mariadb'
    ? { errno: 1969, sqlState: '70100', message: 'Query execution was interrupted (max_statement_time exceeded)', limit: 'time' }
    : { errno: 3024, sqlState: 'HY000', message: 'Query execution was interrupted, maximum statement execution time exceeded', limit: 'time' };
}

function toErrorInfo(err: unknown): SqlErrorInfo {
  const e = err as { errno?: number; sqlState?: string; sqlMessage?: string; message?: string };
  if (typeof e.errno === 'number' && e.sqlMessage !== undefined) return { errno: e.errno, sqlState: e.sqlState, message: e.sqlMessage };
  return { message: e.message ?? String(err) };
}

function connectCore(options: ConnectionOptions): Promise<CoreConnection> {
  return new Promise((resolve, reject) => {
    const connection = createConnection(options);
    const onError = (err: Error) => reject(err);
    connection.once('error', onError);
    connection.once('connect', () => {
      connection.removeListener('error', onError);
      // A killed session reports a fatal error on the connection; the statement's own handler deals with it.
      connection.on('error', () => undefined);
      resolve(connection);
    });
  });
}

function queryCore(connection: CoreConnection, sql: string): Promise<void> {
  return new Promise((resolve, reject) => connection.query(sql, (err) => (err ? reject(err) : resolve())));
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
  | { kind: 'rows'; observation: ObservationBuilder; stoppedEarly: boolean }
  | { kind: 'error'; error: unknown }
  | { kind: 'aborted' };

/**
 * Runs one statement and reads its result as rows of raw bytes, converting
 * each to a Python tuple as it arrives; stops reading (and says so) once the
 * observation is decided or a cap is hit. `abort()` settles it at once (the
 * driver reports nothing for a session it closes itself). The caller ends the
 * session afterwards.
 */
function streamStatement(connection: CoreConnection, sql: string, limits: StreamLimits): { done: Promise<StreamOutcome>; abort: () => void } {
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

/** Names made by a host: `<prefix><creation ms>_<random hex>`. */
export function sandboxName(prefix: string, createdAt: number): string {
  return `${prefix}${createdAt}_${randomBytes(4).toString('hex')}`;
}

/** The creation time of a sandbox name with this prefix, or null when the name is not one. */
export function sandboxCreatedAt(name: string, prefix: string): number | null {
  if (!name.startsWith(prefix)) return null;
  const match = /^(\d{13})_[0-9a-f]{8}$/.exec(name.slice(prefix.length));
  return match ? Number(match[1]) : null;
}

/** What the admin side needs: mysql2/promise's Pool or Connection. */
export interface AdminQueryable {
  query<T extends RowDataPacket[]>(sql: string, values?: unknown[]): Promise<[T, FieldPacket[]]>;
}

async function killSessionsOf(admin: AdminQueryable, user: string): Promise<void> {
  const [rows] = await admin.query<RowDataPacket[]>('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE USER = ?', [user]);
  for (const row of rows) {
    try {
      await admin.query(`KILL ${Number(row.id)}`);
    } catch {
      // The session ended on its own in between.
    }
  }
}

async function dropSandbox(admin: AdminQueryable, name: string): Promise<void> {
  await killSessionsOf(admin, name);
  await admin.query(`DROP USER IF EXISTS ?@'%'`, [name]);
  await admin.query(`DROP DATABASE IF EXISTS ${quoteId(name)}`);
}

export interface SweepReport {
  databases: string[];
  users: string[];
}

function likePrefix(prefix: string): string {
  return `${prefix.replace(/[\\_%]/g, (c) => `\\${c}`)}%`;
}

/**
 * Removes sandboxes (databases and users) whose names carry `prefix` and a
 * creation time older than `olderThanMs` before `now`: what a worker that
 * died mid-episode left behind. Younger ones may belong to live episodes and stay.
 */
export async function sweepSandboxes(
  admin: AdminQueryable,
  options: { olderThanMs: number; prefix?: string; now?: number },
): Promise<SweepReport> {
  const prefix = options.prefix ?? DEFAULT_SANDBOX_PREFIX;
  const now = options.now ?? Date.now();
  const stale = (name: string) => {
    const createdAt = sandboxCreatedAt(name, prefix);
    return createdAt !== null && now - createdAt > options.olderThanMs;
  };
  const [databases] = await admin.query<RowDataPacket[]>(
    'SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?',
    [likePrefix(prefix)],
  );
  const [users] = await admin.query<RowDataPacket[]>('SELECT DISTINCT User AS name FROM mysql.user WHERE User LIKE ?', [likePrefix(prefix)]);
  const report: SweepReport = { databases: [], users: [] };
  for (const name of new Set([...users.map((u) => String(u.name))].filter(stale))) {
    await killSessionsOf(admin, name);
    await admin.query(`DROP USER IF EXISTS ?@'%'`, [name]);
    report.users.push(name);
  }
  for (const name of databases.map((d) => String(d.name)).filter(stale)) {
    await admin.query(`DROP DATABASE IF EXISTS ${quoteId(name)}`);
    report.databases.push(name);
  }
  return report;
}

/** One episode's database and user. */
export class Sandbox {
  private dropped = false;

  constructor(
    private readonly host: SandboxHost,
    /** The name of both the database and the user. */
    readonly name: string,
    private readonly password: string,
    readonly table: DbBenchTable,
    readonly flavor: ServerFlavor,
    /** The server's refusal to create the task's table, when it refused (the episode then runs without it). */
    readonly setupError: SqlErrorInfo | null = null,
  ) {}

  get database(): string {
    return this.name;
  }

  /** The session settings every agent statement runs under. */
  private sessionSettings(): string {
    const time =
      this.flavor === 'mariadb'
        ? `max_statement_time = ${this.host.limits.statementTimeMs / 1000}`
        : `max_execution_time = ${Math.ceil(this.host.limits.statementTimeMs)}`;
    return `SET SESSION sql_mode = ${this.host.escape(this.host.sqlMode)}, ${time}, group_concat_max_len = ${GROUP_CONCAT_MAX_LEN}, collation_connection = ${this.host.escape(COLLATION[this.flavor])}`;
  }

  /** A session as the episode user on its database, with the episode's settings. Tests use it to probe the limits. */
  async connectAsEpisodeUser(): Promise<CoreConnection> {
    const connection = await connectCore(this.host.connectionOptions({ user: this.name, password: this.password, database: this.name }));
    try {
      await queryCore(connection, this.sessionSettings());
    } catch (err) {
      connection.destroy();
      throw err;
    }
    return connection;
  }

  private async connectWithRetry(): Promise<CoreConnection> {
    let passwordRestored = false;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.connectAsEpisodeUser();
      } catch (err) {
        const errno = (err as { errno?: number }).errno;
        // Any account may change its own password (SET PASSWORD); the agent cannot lock the episode out that way.
        if (errno === ER_ACCESS_DENIED && !passwordRestored) {
          passwordRestored = true;
          await this.host.admin.query(`ALTER USER ?@'%' IDENTIFIED BY ?`, [this.name, this.password]);
          continue;
        }
        // The previous statement's session may still be closing on the server.
        if (errno !== ER_TOO_MANY_USER_CONNECTIONS || attempt >= 20) throw err;
        await new Promise((r) => setTimeout(r, 25));
      }
    }
  }

  /**
   * Runs one agent statement as the episode user in a fresh session. SQL
   * errors (including the time limit) become the observation, as in AgentBench.
   */
  async execute(sql: string): Promise<StatementResult> {
    if (this.dropped) throw new SandboxError(`sandbox ${this.name} is dropped; no more statements`);
    const started = Date.now();
    let connection: CoreConnection;
    try {
      connection = await this.connectWithRetry();
    } catch (err) {
      return this.errorResult(toErrorInfo(err), started);
    }
    const statement = streamStatement(connection, sql, {
      maxRows: this.host.limits.maxResultRows,
      maxBytes: this.host.limits.maxResultBytes,
    });
    // The server enforces the limit itself; this catches what slips past it (SET STATEMENT ... FOR, MySQL's SELECT-only limit).
    const watchdog = setTimeout(statement.abort, this.host.limits.statementTimeMs + WATCHDOG_GRACE_MS);
    let unfinished = true;
    try {
      const result = await statement.done;
      unfinished = result.kind === 'aborted' || (result.kind === 'rows' && result.stoppedEarly);
      if (result.kind === 'aborted') return this.errorResult(timeLimitError(this.flavor), started);
      if (result.kind === 'error') return this.errorResult(toErrorInfo(result.error), started);
      const { observation, stoppedEarly } = result;
      return {
        observation: observation.text(!stoppedEarly),
        outcome: observation.rows > 0 ? 'rows' : 'empty',
        rowsFetched: observation.rows,
        bytesFetched: observation.bytes,
        stoppedEarly,
        elapsedMs: Date.now() - started,
      };
    } finally {
      clearTimeout(watchdog);
      // What still runs server-side (an aborted or half-read statement) ends with its session.
      if (unfinished) this.host.kill(connection.threadId);
      connection.destroy();
    }
  }

  private errorResult(error: SqlErrorInfo, started: number): StatementResult {
    // AgentBench's database is named after the table; show that name where the server shows ours.
    const message = error.message.split(this.name).join(this.table.table_name);
    return {
      observation: sqlErrorObservation({ ...error, message }),
      outcome: 'error',
      error: { ...error, message },
      rowsFetched: 0,
      bytesFetched: 0,
      stoppedEarly: false,
      elapsedMs: Date.now() - started,
    };
  }

  /** The table's hash as AgentBench computes it (as admin, on the server), printed as the driver prints rows. */
  async tableHash(hashQuery: string): Promise<string> {
    if (this.dropped) throw new SandboxError(`sandbox ${this.name} is dropped; its table is gone`);
    const connection = await connectCore(this.host.connectionOptions({ database: this.name }));
    try {
      await queryCore(connection, `SET SESSION group_concat_max_len = ${GROUP_CONCAT_MAX_LEN}`);
      const result = await streamStatement(connection, hashQuery, { maxRows: 10, maxBytes: 1 << 20 }).done;
      if (result.kind === 'rows') return result.observation.text(!result.stoppedEarly);
      return this.errorResult(toErrorInfo(result.kind === 'error' ? result.error : new Error('aborted')), Date.now()).observation;
    } finally {
      connection.destroy();
    }
  }

  /** Drops the user (after ending its sessions) and the database. Safe to call twice. */
  async drop(): Promise<void> {
    if (this.dropped) return;
    this.dropped = true;
    await dropSandbox(this.host.admin, this.name);
  }
}

/** The admin side: creates, drops and sweeps sandboxes on one server. */
export class SandboxHost {
  readonly admin: Pool;
  readonly limits: SandboxLimits;
  readonly prefix: string;
  readonly sqlMode: string;
  private readonly address: ServerAddress;
  private flavor: Promise<ServerFlavor> | null = null;

  constructor(options: SandboxHostOptions = {}) {
    this.address = parseMysqlUrl(options.adminUrl ?? DEFAULT_DBBENCH_MYSQL_URL);
    this.prefix = options.prefix ?? DEFAULT_SANDBOX_PREFIX;
    if (!/^[A-Za-z][A-Za-z0-9_]{0,9}$/.test(this.prefix)) {
      throw new SandboxError(`sandbox prefix '${this.prefix}' must be 1-10 letters, digits or _, starting with a letter (MySQL user names are at most 32 characters)`);
    }
    this.limits = { ...DEFAULT_SANDBOX_LIMITS, ...options.limits };
    this.sqlMode = options.sqlMode ?? '';
    this.admin = createPool({
      ...this.connectionOptions({}),
      connectionLimit: options.adminPoolSize ?? 4,
    });
  }

  /** Settings from $DBBENCH_MYSQL_URL, or the local server as root. */
  static fromEnv(options: Omit<SandboxHostOptions, 'adminUrl'> = {}): SandboxHost {
    return new SandboxHost({ ...options, adminUrl: process.env.DBBENCH_MYSQL_URL || DEFAULT_DBBENCH_MYSQL_URL });
  }

  /** Connection options on this server; the admin's credentials unless others are given. */
  connectionOptions(overrides: { user?: string; password?: string; database?: string }): ConnectionOptions {
    const { host, port, socketPath, user, password } = this.address;
    return {
      host,
      port,
      socketPath,
      user: overrides.user ?? user,
      password: overrides.password ?? password,
      database: overrides.database,
      charset: 'utf8mb4_unicode_ci',
      multipleStatements: false,
      // The server may not ask the client for local files (LOAD DATA LOCAL INFILE).
      flags: ['-LOCAL_FILES', '-MULTI_STATEMENTS'],
      infileStreamFactory: () => {
        throw new SandboxError('LOAD DATA LOCAL INFILE is not allowed in a DBBench sandbox');
      },
      connectTimeout: 10_000,
    };
  }

  escape(value: string): string {
    return this.admin.escape(value);
  }

  serverFlavor(): Promise<ServerFlavor> {
    this.flavor ??= this.admin.query<RowDataPacket[]>('SELECT VERSION() AS version').then(([rows]) =>
      /mariadb/i.test(String(rows[0].version)) ? 'mariadb' : 'mysql',
    );
    return this.flavor;
  }

  /** Ends a session (fire and forget: a session that already ended is fine). */
  kill(threadId: number | null | undefined): void {
    if (!threadId) return;
    this.admin.query(`KILL ${Number(threadId)}`).catch(() => undefined);
  }

  /** Creates an episode's database, user and table (every column TEXT, the rows inserted), as AgentBench does. */
  async open(table: DbBenchTable): Promise<Sandbox> {
    const flavor = await this.serverFlavor();
    const name = sandboxName(this.prefix, Date.now());
    const password = randomBytes(18).toString('base64url');
    const admin = this.admin;
    try {
      await admin.query(`CREATE DATABASE ${quoteId(name)} CHARACTER SET utf8mb4 COLLATE ${COLLATION[flavor]}`);
      const timeLimit = flavor === 'mariadb' ? ` MAX_STATEMENT_TIME ${this.limits.statementTimeMs / 1000}` : '';
      await admin.query(
        `CREATE USER ?@'%' IDENTIFIED BY ? WITH MAX_USER_CONNECTIONS ${Math.floor(this.limits.maxUserConnections)}${timeLimit}`,
        [name, password],
      );
      await admin.query(`GRANT ${EPISODE_PRIVILEGES} ON ${grantDatabase(name)}.* TO ?@'%'`, [name]);
    } catch (err) {
      await dropSandbox(admin, name).catch(() => undefined);
      throw new SandboxError(`cannot set up a sandbox on the DBBench server: ${(err as Error).message}`);
    }
    const setupError = await this.createTable(name, table).catch(async (err: unknown) => {
      if (typeof (err as { errno?: unknown }).errno === 'number') return toErrorInfo(err);
      await dropSandbox(admin, name).catch(() => undefined);
      throw err;
    });
    return new Sandbox(this, name, password, table, flavor, setupError ?? null);
  }

  /**
   * The table as AgentBench creates it: every column TEXT, the rows in one
   * INSERT per 500. A server refusal (say, an empty column name) is returned,
   * not thrown: AgentBench ignores it and runs the episode without the table.
   */
  private async createTable(database: string, table: DbBenchTable): Promise<void> {
    const columns = table.table_info.columns;
    const target = `${quoteId(database)}.${quoteId(table.table_name)}`;
    await this.admin.query(`CREATE TABLE ${target} (${columns.map((c) => `${quoteId(c.name)} TEXT`).join(',')})`);
    const rows = table.table_info.rows;
    const columnList = columns.map((c) => quoteId(c.name)).join(',');
    const placeholders = `(${columns.map(() => '?').join(',')})`;
    for (let i = 0; i < rows.length; i += 500) {
      const chunk = rows.slice(i, i + 500);
      await this.admin.query(`INSERT INTO ${target} (${columnList}) VALUES ${chunk.map(() => placeholders).join(',')}`, chunk.flat());
    }
  }

  sweep(options: { olderThanMs: number; now?: number }): Promise<SweepReport> {
    return sweepSandboxes(this.admin, { ...options, prefix: this.prefix });
  }

  async close(): Promise<void> {
    await this.admin.end();
  }
}
