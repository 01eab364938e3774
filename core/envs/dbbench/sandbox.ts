/**
 * Per-episode isolation on a MySQL-compatible server (MariaDB or MySQL 8).
 * Each episode gets its own database and its own user, granted on that
 * database only, with a random password, a connection cap and a statement
 * time limit; the agent's SQL runs as that user, never as the admin. Names
 * carry a prefix and their creation time, so a sweeper (sandbox-sweeper.ts)
 * can remove what a dead worker left behind.
 *
 * Like AgentBench (which reconnects before every statement), each statement
 * runs in a fresh session (statement.ts runs it there): session state does
 * not carry over between turns.
 */
import { randomBytes } from 'node:crypto';
import { createConnection, type Connection as CoreConnection, type ConnectionOptions } from 'mysql2';
import { createPool, type Pool, type RowDataPacket } from 'mysql2/promise';
import { sqlErrorObservation } from './observation';
import { DEFAULT_SANDBOX_PREFIX, killSessionsOf, quoteId, sandboxName, type AdminQueryable } from './sandbox-admin';
import { sweepSandboxes, type SweepReport } from './sandbox-sweeper';
import { runStatement, streamStatement, toErrorInfo, type SqlErrorInfo, type StatementLimits, type StatementResult } from './statement';
import type { DbBenchTable } from './tasks';
import { countSandboxSetup, countSandboxSweep } from '../../metrics';

export const DEFAULT_DBBENCH_MYSQL_URL = 'mysql://root@127.0.0.1:3306';

export interface SandboxLimits extends StatementLimits {
  /** MAX_USER_CONNECTIONS of the episode user. */
  maxUserConnections: number;
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

const ER_TOO_MANY_USER_CONNECTIONS = 1226;
const ER_ACCESS_DENIED = 1045;

/** The error each server reports when a statement outruns its time limit; the watchdog reports the same. */
function timeLimitError(flavor: ServerFlavor): SqlErrorInfo {
  return flavor === 'mariadb'
    ? { errno: 1969, sqlState: '70100', message: 'Query execution was interrupted (max_statement_time exceeded)', limit: 'time' }
    : { errno: 3024, sqlState: 'HY000', message: 'Query execution was interrupted, maximum statement execution time exceeded', limit: 'time' };
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

async function dropSandbox(admin: AdminQueryable, name: string): Promise<void> {
  await killSessionsOf(admin, name);
  await admin.query(`DROP USER IF EXISTS ?@'%'`, [name]);
  await admin.query(`DROP DATABASE IF EXISTS ${quoteId(name)}`);
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
    return runStatement(connection, sql, {
      limits: this.host.limits,
      timeLimitError: timeLimitError(this.flavor),
      kill: (threadId) => this.host.kill(threadId),
      started,
      errorResult: (error) => this.errorResult(error, started),
    });
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
    try {
      const sandbox = await this.setUp(table);
      // A table the server refused counts as set up: AgentBench runs such an episode without it.
      countSandboxSetup('ok');
      return sandbox;
    } catch (err) {
      countSandboxSetup('error');
      throw err;
    }
  }

  private async setUp(table: DbBenchTable): Promise<Sandbox> {
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

  async sweep(options: { olderThanMs: number; now?: number }): Promise<SweepReport> {
    try {
      const report = await sweepSandboxes(this.admin, { ...options, prefix: this.prefix });
      countSandboxSweep('ok', { databases: report.databases.length, users: report.users.length });
      return report;
    } catch (err) {
      countSandboxSweep('error');
      throw err;
    }
  }

  async close(): Promise<void> {
    await this.admin.end();
  }
}
