/**
 * The sweeper: removes the sandboxes a worker that died mid-episode left
 * behind. A live host holds a named lock on each of its sandboxes (see
 * ownershipLock); the server frees it when the host's session ends, however
 * the worker ended. So a sandbox whose lock is free is a leftover, whatever
 * its age, and one whose lock is held is live, whatever its age.
 */
import type { RowDataPacket } from 'mysql2/promise';
import { DEFAULT_SANDBOX_PREFIX, killSessionsOf, ownershipLock, quoteId, sandboxCreatedAt, type AdminQueryable } from './sandbox-admin';

export interface SweepReport {
  databases: string[];
  users: string[];
}

function likePrefix(prefix: string): string {
  return `${prefix.replace(/[\\_%]/g, (c) => `\\${c}`)}%`;
}

async function ownedByLiveHost(admin: AdminQueryable, name: string): Promise<boolean> {
  const [rows] = await admin.query<RowDataPacket[]>('SELECT IS_USED_LOCK(?) AS holder', [ownershipLock(name)]);
  return rows[0]?.holder !== null && rows[0]?.holder !== undefined;
}

/**
 * Removes sandboxes (their sessions, users and databases) whose names carry
 * `prefix` and that no live host owns. `olderThanMs` keeps the younger ones
 * (by the creation time in their names) even so; 0 sweeps every unowned one.
 */
export async function sweepSandboxes(
  admin: AdminQueryable,
  options: { olderThanMs: number; prefix?: string; now?: number },
): Promise<SweepReport> {
  const prefix = options.prefix ?? DEFAULT_SANDBOX_PREFIX;
  const now = options.now ?? Date.now();
  const oldEnough = (name: string) => {
    const createdAt = sandboxCreatedAt(name, prefix);
    return createdAt !== null && now - createdAt >= options.olderThanMs;
  };
  const [databases] = await admin.query<RowDataPacket[]>(
    'SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?',
    [likePrefix(prefix)],
  );
  const [users] = await admin.query<RowDataPacket[]>('SELECT DISTINCT User AS name FROM mysql.user WHERE User LIKE ?', [
    likePrefix(prefix),
  ]);
  const databaseNames = new Set(databases.map((d) => String(d.name)));
  const userNames = new Set(users.map((u) => String(u.name)));
  const report: SweepReport = { databases: [], users: [] };
  for (const name of [...new Set([...userNames, ...databaseNames])].filter(oldEnough).sort()) {
    if (await ownedByLiveHost(admin, name)) continue;
    await killSessionsOf(admin, name);
    if (userNames.has(name)) {
      await admin.query(`DROP USER IF EXISTS ?@'%'`, [name]);
      report.users.push(name);
    }
    if (databaseNames.has(name)) {
      await admin.query(`DROP DATABASE IF EXISTS ${quoteId(name)}`);
      report.databases.push(name);
    }
  }
  return report;
}
