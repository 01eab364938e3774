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
 *
 * The agent is an adversary. After every statement the host checks what the
 * episode's database holds: a table of an engine outside the few it allows
 * ends the episode as a wrong answer, and so does growth past the caps below.
 * Scoring reads the answer table as the admin, so it first locks the episode
 * user out and ends its sessions, refuses anything under the table's name
 * but a plain base table of an allowed engine without generated columns, and
 * runs the hash under a time limit and a watchdog that kills its session.
 */
import { randomBytes } from 'node:crypto';
import { createConnection, escape, type Connection as CoreConnection, type ConnectionOptions } from 'mysql2';
import { createConnection as createPromiseConnection, createPool, type Connection as PromiseConnection, type Pool, type RowDataPacket } from 'mysql2/promise';
import { sqlErrorObservation } from './observation';
import { DEFAULT_SANDBOX_PREFIX, killSessionsOf, ownershipLock, quoteId, sandboxName, type AdminQueryable } from './sandbox-admin';
import { sweepSandboxes, type SweepReport } from './sandbox-sweeper';
import { runStatement, streamStatement, toErrorInfo, type SqlErrorInfo, type StatementLimits, type StatementResult } from './statement';
import type { DbBenchTable } from './tasks';
import { countSandboxSetup, countSandboxSweep } from '../../metrics';

export const DEFAULT_DBBENCH_MYSQL_URL = 'mysql://root@127.0.0.1:3306';

export interface SandboxLimits extends StatementLimits {
  /** MAX_USER_CONNECTIONS of the episode user. */
  maxUserConnections: number;
  /** Time limit of the admin's scoring statement (server-side, plus a watchdog that kills its session). */
  scoringTimeMs: number;
  /** What the episode's database may hold on disk (data and indexes); checked after every statement. */
  maxDatabaseBytes: number;
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  statementTimeMs: 10_000,
  maxUserConnections: 2,
  maxResultRows: 10_000,
  maxResultBytes: 4 * 1024 * 1024,
  scoringTimeMs: 10_000,
  maxDatabaseBytes: 64 * 1024 * 1024,
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

/**
 * The privileges an episode user holds on its own database: everything but
 * routines, events, grants and temporary tables. A temporary table is
 * invisible to the admin's checks (information_schema shows it to its own
 * session only), and InnoDB keeps its pages in the server-wide ibtmp1, which
 * grows with it and shrinks only when the server restarts. No DBBench task
 * uses one (AgentBench's tasks and gold labels hold no TEMPORARY).
 */
const EPISODE_PRIVILEGES = [
  'SELECT', 'INSERT', 'UPDATE', 'DELETE', 'CREATE', 'DROP', 'ALTER', 'INDEX', 'REFERENCES',
  'LOCK TABLES', 'CREATE VIEW', 'SHOW VIEW', 'TRIGGER',
].join(', ');

const COLLATION: Record<ServerFlavor, string> = {
  // The closest MariaDB has to MySQL 8's default utf8mb4_0900_ai_ci: UCA-based, accent- and case-insensitive, no padding.
  mariadb: 'utf8mb4_unicode_520_nopad_ci',
  mysql: 'utf8mb4_0900_ai_ci',
};

/** MySQL 8's default; MariaDB's is 1M. AgentBench's table hash and agents' GROUP_CONCATs ran under MySQL's. */
const GROUP_CONCAT_MAX_LEN = 1024;

/**
 * The engines an episode's tables may use: local disk storage whose size
 * information_schema reports (InnoDB's by its files). Any other ends the
 * episode: CSV and ARCHIVE report no size, so they would grow past the cap
 * unseen; BLACKHOLE, MRG_MyISAM, CONNECT, FEDERATED and their kind read or
 * write elsewhere; MEMORY holds the server's RAM, up to a max_heap_table_size
 * the creating statement may raise for itself (SET STATEMENT), and no task
 * needs it. Scoring reads only a table of one of these.
 */
const ALLOWED_ENGINES = ['InnoDB', 'MyISAM', 'Aria'] as const;
const ALLOWED_ENGINE_KEYS = new Set(ALLOWED_ENGINES.map((e) => e.toLowerCase()));

/** Past the scoring time limit, the watchdog kills the hash's session after this grace. */
const SCORING_WATCHDOG_GRACE_MS = 1000;

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
  // Locked first, so no new session can log in between the kills and the drop.
  await admin.query(`ALTER USER IF EXISTS ?@'%' ACCOUNT LOCK`, [name]).catch(() => undefined);
  await killSessionsOf(admin, name);
  await admin.query(`DROP USER IF EXISTS ?@'%'`, [name]);
  await admin.query(`DROP DATABASE IF EXISTS ${quoteId(name)}`);
}

/** What scoring made of the answer table: its hash as printed, or why it was not read. */
export type TableVerdict = { kind: 'hash'; hash: string } | { kind: 'refused'; reason: string };

/** One episode's database and user. */
export class Sandbox {
  /** No more statements or scoring (the sandbox was scored or dropped). */
  private dropped = false;
  private gone = false;

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
    const result = await runStatement(connection, sql, {
      limits: this.host.limits,
      timeLimitError: timeLimitError(this.flavor),
      kill: (threadId) => this.host.kill(threadId),
      started,
      errorResult: (error) => this.errorResult(error, started),
    });
    const breach = await this.checkDatabase();
    if (!breach) return result;
    const ended = this.errorResult({ message: `${breach.reason}; the episode ends here`, limit: breach.kind }, started);
    return breach.kind === 'size' ? { ...ended, capExceeded: breach.reason } : { ...ended, refused: breach.reason };
  }

  /**
   * What the database holds that the sandbox does not allow, if anything: a
   * table (or sequence) of an engine outside ALLOWED_ENGINES or with its
   * files outside the database's folder (DATA or INDEX DIRECTORY, which needs
   * no FILE privilege and writes wherever the server's OS user may, and
   * DROP DATABASE leaves an InnoDB table's folder there), or a total size
   * (data and indexes; InnoDB's by its files, which the statistics trail)
   * past the cap. The engine comes first: a CSV table reports no size.
   */
  async checkDatabase(): Promise<{ kind: 'refused' | 'size'; reason: string } | null> {
    const [tables] = await this.host.admin.query<RowDataPacket[]>(
      'SELECT TABLE_NAME AS name, TABLE_TYPE AS type, ENGINE AS engine, CREATE_OPTIONS AS options, DATA_LENGTH AS data, INDEX_LENGTH AS indexes ' +
        'FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?',
      [this.name],
    );
    let bytes = 0;
    for (const table of tables) {
      // A view stores nothing (its ENGINE is NULL); anything else without a known engine is refused with the rest.
      if (table.type === 'VIEW') continue;
      const engine = table.engine == null ? '' : String(table.engine);
      if (!ALLOWED_ENGINE_KEYS.has(engine.toLowerCase())) {
        const reason = `table '${String(table.name)}' is stored by ${engine || 'no engine'}, which the sandbox does not allow (only ${ALLOWED_ENGINES.join(', ')})`;
        return { kind: 'refused', reason };
      }
      const elsewhere = /\b(DATA|INDEX) DIRECTORY\s*=/i.exec(String(table.options ?? ''));
      if (elsewhere) {
        return { kind: 'refused', reason: `table '${String(table.name)}' keeps its files outside the database's folder (${elsewhere[1].toUpperCase()} DIRECTORY), which the sandbox does not allow` };
      }
      if (engine.toLowerCase() !== 'innodb') bytes += Number(table.data ?? 0) + Number(table.indexes ?? 0);
    }
    bytes += await this.host.innodbFileBytes(this.name, this.flavor);
    const { maxDatabaseBytes } = this.host.limits;
    return bytes > maxDatabaseBytes ? { kind: 'size', reason: `the episode's database holds ${bytes} bytes, past the sandbox's ${maxDatabaseBytes}` } : null;
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

  /**
   * The answer table's hash as AgentBench computes it (as admin, on the
   * server), printed as the driver prints rows; or why it was not read. The
   * episode user is locked out and its sessions ended first, so what is
   * checked is what is hashed. Only a base table of a local engine without
   * generated columns is read (a view, a sequence or a computed column could
   * make the admin's read slow or run someone else's code), under a time
   * limit and a watchdog. The sandbox takes no more statements afterwards.
   */
  async scoreTable(table: DbBenchTable, hashQuery: string): Promise<TableVerdict> {
    if (this.dropped) throw new SandboxError(`sandbox ${this.name} is dropped; its table is gone`);
    const admin = this.host.admin;
    this.dropped = true;
    await admin.query(`ALTER USER ?@'%' ACCOUNT LOCK`, [this.name]);
    await killSessionsOf(admin, this.name);
    const refusal = await this.answerTableRefusal(table.table_name);
    if (refusal) return { kind: 'refused', reason: refusal };
    return this.hashWithinLimit(hashQuery);
  }

  private async answerTableRefusal(tableName: string): Promise<string | null> {
    const admin = this.host.admin;
    // information_schema compares names without case; the hash's FROM does not.
    const [tables] = await admin.query<RowDataPacket[]>(
      'SELECT TABLE_NAME AS name, TABLE_TYPE AS type, ENGINE AS engine FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
      [this.name, tableName],
    );
    const found = tables.find((t) => String(t.name) === tableName);
    if (!found) return `no table named '${tableName}'`;
    if (found.type !== 'BASE TABLE') return `'${tableName}' is a ${String(found.type)}, not a base table`;
    const engine = String(found.engine ?? '');
    if (!ALLOWED_ENGINE_KEYS.has(engine.toLowerCase())) return `'${tableName}' is stored by ${engine || 'no engine'}, not a local table engine`;
    const [columns] = await admin.query<RowDataPacket[]>(
      'SELECT TABLE_NAME AS tableName, COLUMN_NAME AS name FROM information_schema.COLUMNS ' +
        "WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND (COALESCE(GENERATION_EXPRESSION, '') <> '' OR EXTRA LIKE '%GENERATED%')",
      [this.name, tableName],
    );
    const generated = columns.filter((c) => String(c.tableName) === tableName).map((c) => String(c.name));
    return generated.length ? `'${tableName}' has generated columns (${generated.join(', ')})` : null;
  }

  private async hashWithinLimit(hashQuery: string): Promise<TableVerdict> {
    const { scoringTimeMs } = this.host.limits;
    const connection = await connectCore(this.host.connectionOptions({ database: this.name }));
    const seconds = scoringTimeMs / 1000;
    const lockWait = Math.max(1, Math.ceil(seconds));
    let watchdog: NodeJS.Timeout | undefined;
    let finished = false;
    try {
      await queryCore(connection, `SET SESSION group_concat_max_len = ${GROUP_CONCAT_MAX_LEN}, lock_wait_timeout = ${lockWait}`);
      let sql = hashQuery;
      if (this.flavor === 'mariadb') sql = `SET STATEMENT max_statement_time = ${seconds} FOR ${hashQuery}`;
      else await queryCore(connection, `SET SESSION max_execution_time = ${Math.ceil(scoringTimeMs)}`);
      const statement = streamStatement(connection, sql, { maxRows: 10, maxBytes: 1 << 20 });
      watchdog = setTimeout(statement.abort, scoringTimeMs + SCORING_WATCHDOG_GRACE_MS);
      const result = await statement.done;
      finished = result.kind !== 'aborted' && !(result.kind === 'rows' && result.stoppedEarly);
      if (result.kind === 'rows') return { kind: 'hash', hash: result.observation.text(!result.stoppedEarly) };
      const error = result.kind === 'error' ? toErrorInfo(result.error) : null;
      if (!error || error.errno === timeLimitError(this.flavor).errno) {
        return { kind: 'refused', reason: `the table's hash did not finish within the scoring limit of ${seconds} s` };
      }
      // AgentBench records the hash query's error as the answer (say, a column the agent dropped).
      return { kind: 'hash', hash: this.errorResult(error, Date.now()).observation };
    } finally {
      clearTimeout(watchdog);
      if (!finished) this.host.kill(connection.threadId);
      connection.destroy();
    }
  }

  /** Drops the user (after locking it and ending every session on the sandbox) and the database. Safe to call twice. */
  async drop(): Promise<void> {
    if (this.gone) return;
    this.gone = true;
    this.dropped = true;
    try {
      await dropSandbox(this.host.admin, this.name);
    } finally {
      await this.host.release(this.name);
    }
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
  /** The session that holds this host's ownership locks; the server frees them when it ends, however the process ends. */
  private owner: Promise<PromiseConnection> | null = null;

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

  private ownerSession(): Promise<PromiseConnection> {
    this.owner ??= createPromiseConnection(this.connectionOptions({})).then((connection) => {
      // A lost session lost its locks too; the next claim opens a new one.
      connection.on('error', () => {
        this.owner = null;
      });
      return connection;
    });
    this.owner.catch(() => {
      this.owner = null;
    });
    return this.owner;
  }

  /** Marks a sandbox name as this live host's (see ownershipLock), before anything of it exists. */
  private async claim(name: string): Promise<void> {
    const session = await this.ownerSession();
    const [rows] = await session.query<RowDataPacket[]>('SELECT GET_LOCK(?, 0) AS got', [ownershipLock(name)]);
    if (Number(rows[0]?.got) !== 1) throw new SandboxError(`cannot claim sandbox ${name}: its ownership lock is held elsewhere`);
  }

  /** Gives up a dropped sandbox's name. */
  async release(name: string): Promise<void> {
    const session = await this.owner?.catch(() => null);
    await session?.query('DO RELEASE_LOCK(?)', [ownershipLock(name)]).catch(() => undefined);
  }

  /** Bytes of the InnoDB files of one database (information_schema's DATA_LENGTH trails InnoDB's writes). */
  async innodbFileBytes(database: string, flavor: ServerFlavor): Promise<number> {
    const view = flavor === 'mariadb' ? 'information_schema.INNODB_SYS_TABLESPACES' : 'information_schema.INNODB_TABLESPACES';
    // Sandbox names are letters, digits and `_`, which InnoDB's file names keep as they are.
    const [rows] = await this.admin.query<RowDataPacket[]>(`SELECT COALESCE(SUM(FILE_SIZE), 0) AS bytes FROM ${view} WHERE NAME LIKE ?`, [
      `${database.replace(/[\\_%]/g, (c) => `\\${c}`)}/%`,
    ]);
    return Number(rows[0]?.bytes ?? 0);
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
    await this.claim(name);
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
      await this.release(name);
      throw new SandboxError(`cannot set up a sandbox on the DBBench server: ${(err as Error).message}`);
    }
    const setupError = await this.createTable(name, table).catch(async (err: unknown) => {
      if (typeof (err as { errno?: unknown }).errno === 'number') return toErrorInfo(err);
      await dropSandbox(admin, name).catch(() => undefined);
      await this.release(name);
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
    // Values escaped here, not bound with `?`: placeholder substitution scans the whole text, backticked names
    // included, so a task's column named `a?` would take a value meant for a row (an injection as the admin).
    for (let i = 0; i < rows.length; i += 500) {
      const chunk = rows.slice(i, i + 500);
      await this.admin.query(`INSERT INTO ${target} (${columnList}) VALUES ${chunk.map((row) => `(${row.map((cell) => escape(cell)).join(',')})`).join(',')}`);
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
    const owner = await this.owner?.catch(() => null);
    this.owner = null;
    await owner?.end().catch(() => undefined);
    await this.admin.end();
  }
}
