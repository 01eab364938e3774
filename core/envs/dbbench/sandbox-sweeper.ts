/**
 * The sweeper: removes the sandboxes a worker that died mid-episode left
 * behind, told apart from live ones by the creation time in their names.
 */
import type { RowDataPacket } from 'mysql2/promise';
import { DEFAULT_SANDBOX_PREFIX, killSessionsOf, quoteId, sandboxCreatedAt, type AdminQueryable } from './sandbox-admin';

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
