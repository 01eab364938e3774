/**
 * Per-episode isolation on a MySQL-compatible server (MariaDB or MySQL 8).
 * Each episode gets its own database and its own user, granted on that
 * database only, with a random password, a connection cap and a statement
 * time limit; the agent's SQL runs as that user, never as the admin. Names
 * carry a prefix and their creation time, so a sweeper (sandbox-sweeper.ts)
 * can remove what a dead worker left behind.
 *
 * What an episode does with its sandbox (its statements, the checks after
 * each, scoring) is in sandbox-episode.ts.
 */
import { randomBytes } from 'node:crypto';
import { escape, type ConnectionOptions } from 'mysql2';
import {
  createConnection as createPromiseConnection,
  createPool,
  type Connection as PromiseConnection,
  type Pool,
  type RowDataPacket,
} from 'mysql2/promise';
import { COLLATION, DEFAULT_DBBENCH_MYSQL_URL, parseMysqlUrl, SandboxError, type ServerAddress, type ServerFlavor } from './mysql-server';
import { DEFAULT_SANDBOX_PREFIX, dropSandbox, ownershipLock, quoteId, sandboxName } from './sandbox-admin';
import { Sandbox } from './sandbox-episode';
import { sweepSandboxes, type SweepReport } from './sandbox-sweeper';
import { toErrorInfo, type StatementLimits } from './statement';
import type { DbBenchTable } from './tasks';
import { countSandboxSetup, countSandboxSweep } from '../../metrics';

export { Sandbox } from './sandbox-episode';

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
  'SELECT',
  'INSERT',
  'UPDATE',
  'DELETE',
  'CREATE',
  'DROP',
  'ALTER',
  'INDEX',
  'REFERENCES',
  'LOCK TABLES',
  'CREATE VIEW',
  'SHOW VIEW',
  'TRIGGER',
].join(', ');

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
      throw new SandboxError(
        `sandbox prefix '${this.prefix}' must be 1-10 letters, digits or _, starting with a letter (MySQL user names are at most 32 characters)`,
      );
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
    this.flavor ??= this.admin
      .query<RowDataPacket[]>('SELECT VERSION() AS version')
      .then(([rows]) => (/mariadb/i.test(String(rows[0].version)) ? 'mariadb' : 'mysql'));
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
      await this.admin.query(
        `INSERT INTO ${target} (${columnList}) VALUES ${chunk.map((row) => `(${row.map((cell) => escape(cell)).join(',')})`).join(',')}`,
      );
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
