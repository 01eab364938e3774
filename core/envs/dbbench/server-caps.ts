/**
 * What the DBBench server itself must cap, because no grant can: how far
 * InnoDB's server-wide temporary tablespace (ibtmp1) may grow, and how far a
 * session may raise max_heap_table_size (which sizes MEMORY tables and the
 * in-memory temporary tables of its own statements; `SET STATEMENT ... FOR`
 * raises it for one statement). The project's own servers are started with
 * both (docker-compose.yml, .ci/db-users.sh); `harness-s doctor` reads them
 * from the server in use, and also says when a table may be put outside the
 * datadir (DATA DIRECTORY, which MariaDB allows without the FILE privilege
 * unless started with --symbolic-links=0).
 */
import { createConnection, type RowDataPacket } from 'mysql2/promise';
import { DEFAULT_DBBENCH_MYSQL_URL, parseMysqlUrl } from './mysql-server';

/** The caps the project's servers are started with. */
export const DBBENCH_SERVER_CAPS = {
  /** `innodb_temp_data_file_path=ibtmp1:12M:autoextend:max:1G`. */
  ibtmp1MaxBytes: 1024 * 1024 * 1024,
  /** `--maximum-max_heap_table_size=64M`: no session may raise max_heap_table_size past it. */
  maxHeapTableBytes: 64 * 1024 * 1024,
} as const;

/** Far past any sensible cap: what the probe asks for, to see what the server grants. */
const PROBE_BYTES = 1024 ** 4;

export interface DbBenchServerCaps {
  server: string;
  /** The ibtmp1 cap in bytes, or null when it may grow without one. */
  ibtmp1MaxBytes: number | null;
  /** The largest max_heap_table_size a session could set for itself. */
  sessionMaxHeapTableBytes: number;
  /** Whether CREATE TABLE ... DATA DIRECTORY may put a table's files outside the datadir (null: the server does not say). */
  symlinks: boolean | null;
  /** What is missing, in words; empty when all is in place. */
  missing: string[];
}

const UNITS: Record<string, number> = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

function bytesOf(size: string): number {
  const match = /^(\d+)([KMGT]?)$/i.exec(size);
  return match ? Number(match[1]) * UNITS[match[2].toUpperCase()] : NaN;
}

/**
 * How far the temporary tablespace of an innodb_temp_data_file_path may
 * grow, in bytes: its `max:` (`ibtmp1:12M:autoextend:max:1G`), the sum of its
 * files' sizes when none autoextends (`ibtmp1:12M`), null when it autoextends without a max.
 */
export function ibtmp1MaxBytes(path: string): number | null {
  const text = path.trim();
  const max = /:max:(\d+[KMGT]?)$/i.exec(text);
  if (max) return bytesOf(max[1]);
  if (/:autoextend/i.test(text)) return null;
  return text.split(';').reduce((n, file) => n + bytesOf(file.split(':')[1] ?? ''), 0);
}

/** Reads both caps from the server at `adminUrl`: the first from its variable, the second by trying to raise it in a session of our own. */
export async function readDbBenchServerCaps(
  adminUrl = process.env.DBBENCH_MYSQL_URL || DEFAULT_DBBENCH_MYSQL_URL,
): Promise<DbBenchServerCaps> {
  const { host, port, socketPath, user, password } = parseMysqlUrl(adminUrl);
  const connection = await createConnection({ host, port, socketPath, user, password, connectTimeout: 2000 });
  try {
    const [rows] = await connection.query<RowDataPacket[]>(
      'SELECT VERSION() AS version, @@innodb_temp_data_file_path AS tempPath, @@SESSION.max_heap_table_size AS heap',
    );
    const { version, tempPath, heap } = rows[0];
    // --maximum-max_heap_table_size has no variable of its own: a SET past it is cut to it (with a warning), whoever asks.
    await connection.query(`SET SESSION max_heap_table_size = ${PROBE_BYTES}`);
    const [raised] = await connection.query<RowDataPacket[]>('SELECT @@SESSION.max_heap_table_size AS heap');
    await connection.query(`SET SESSION max_heap_table_size = ${Number(heap)}`);
    const [links] = await connection.query<RowDataPacket[]>('SELECT @@have_symlink AS links').catch(() => [[] as RowDataPacket[]]);
    const symlinks = links.length ? String(links[0].links).toUpperCase() === 'YES' : null;
    const ibtmp1Max = ibtmp1MaxBytes(String(tempPath));
    const sessionMax = Number(raised[0].heap);
    const missing: string[] = [];
    if (ibtmp1Max === null || ibtmp1Max > DBBENCH_SERVER_CAPS.ibtmp1MaxBytes) {
      missing.push(
        `ibtmp1 may grow ${ibtmp1Max === null ? 'without a cap' : `to ${ibtmp1Max} bytes`} (innodb_temp_data_file_path=${String(tempPath)})`,
      );
    }
    if (sessionMax > DBBENCH_SERVER_CAPS.maxHeapTableBytes) {
      missing.push(`a session may raise max_heap_table_size to ${sessionMax} bytes (no --maximum-max_heap_table_size)`);
    }
    // mariadb-install-db grants every account (PUBLIC, or the anonymous user on older servers) the `test` databases.
    const [shared] = await connection
      .query<RowDataPacket[]>("SELECT DISTINCT Db AS db FROM mysql.db WHERE User IN ('', 'PUBLIC')")
      .catch(() => [[] as RowDataPacket[]]);
    if (shared.length) {
      missing.push(
        `every account may use database(s) ${shared.map((r) => String(r.db)).join(', ')} (granted to PUBLIC or the anonymous user), outside an episode's caps and teardown`,
      );
    }
    if (symlinks)
      missing.push(
        "CREATE TABLE ... DATA DIRECTORY may put a table's files wherever the server's OS user may write (have_symlink=YES; no --symbolic-links=0)",
      );
    return { server: String(version), ibtmp1MaxBytes: ibtmp1Max, sessionMaxHeapTableBytes: sessionMax, symlinks, missing };
  } finally {
    await connection.end().catch(() => connection.destroy());
  }
}
