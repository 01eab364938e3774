/**
 * Reaching the DBBench server: its URL, which server it is (MariaDB or
 * MySQL 8) and the settings that differ between the two, and raw sessions
 * (mysql2's core connections, whose statements a watchdog can kill).
 */
import { createConnection, type Connection as CoreConnection, type ConnectionOptions } from 'mysql2';
import type { SqlErrorInfo } from './statement';

export const DEFAULT_DBBENCH_MYSQL_URL = 'mysql://root@127.0.0.1:3306';

export type ServerFlavor = 'mariadb' | 'mysql';

export interface ServerAddress {
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

export const COLLATION: Record<ServerFlavor, string> = {
  // The closest MariaDB has to MySQL 8's default utf8mb4_0900_ai_ci: UCA-based, accent- and case-insensitive, no padding.
  mariadb: 'utf8mb4_unicode_520_nopad_ci',
  mysql: 'utf8mb4_0900_ai_ci',
};

/** MySQL 8's default; MariaDB's is 1M. AgentBench's table hash and agents' GROUP_CONCATs ran under MySQL's. */
export const GROUP_CONCAT_MAX_LEN = 1024;

/** The error each server reports when a statement outruns its time limit; the watchdog reports the same. */
export function timeLimitError(flavor: ServerFlavor): SqlErrorInfo {
  return flavor === 'mariadb'
    ? { errno: 1969, sqlState: '70100', message: 'Query execution was interrupted (max_statement_time exceeded)', limit: 'time' }
    : {
        errno: 3024,
        sqlState: 'HY000',
        message: 'Query execution was interrupted, maximum statement execution time exceeded',
        limit: 'time',
      };
}

export function connectCore(options: ConnectionOptions): Promise<CoreConnection> {
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

export function queryCore(connection: CoreConnection, sql: string): Promise<void> {
  return new Promise((resolve, reject) => connection.query(sql, (err) => (err ? reject(err) : resolve())));
}
