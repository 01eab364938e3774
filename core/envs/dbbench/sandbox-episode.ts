/**
 * One episode's database and user, as the agent and scoring use them.
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
import type { Connection as CoreConnection } from 'mysql2';
import type { RowDataPacket } from 'mysql2/promise';
import { COLLATION, connectCore, GROUP_CONCAT_MAX_LEN, queryCore, SandboxError, timeLimitError, type ServerFlavor } from './mysql-server';
import { sqlErrorObservation } from './observation';
import type { SandboxHost } from './sandbox';
import { dropSandbox, killSessionsOf } from './sandbox-admin';
import { runStatement, streamStatement, toErrorInfo, type SqlErrorInfo, type StatementResult } from './statement';
import type { DbBenchTable } from './tasks';

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
        return {
          kind: 'refused',
          reason: `table '${String(table.name)}' keeps its files outside the database's folder (${elsewhere[1].toUpperCase()} DIRECTORY), which the sandbox does not allow`,
        };
      }
      if (engine.toLowerCase() !== 'innodb') bytes += Number(table.data ?? 0) + Number(table.indexes ?? 0);
    }
    bytes += await this.host.innodbFileBytes(this.name, this.flavor);
    const { maxDatabaseBytes } = this.host.limits;
    return bytes > maxDatabaseBytes
      ? { kind: 'size', reason: `the episode's database holds ${bytes} bytes, past the sandbox's ${maxDatabaseBytes}` }
      : null;
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
    if (!ALLOWED_ENGINE_KEYS.has(engine.toLowerCase()))
      return `'${tableName}' is stored by ${engine || 'no engine'}, not a local table engine`;
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
