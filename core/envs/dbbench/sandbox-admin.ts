/**
 * The admin's side of sandboxes, shared by their setup and teardown and by
 * the sweeper: names that carry a prefix and their creation time (so a
 * sweeper can date what a dead worker left behind), the named lock by which a
 * live host claims each of its sandboxes, identifier quoting, and ending a
 * sandbox's sessions.
 */
import { randomBytes } from 'node:crypto';
import type { FieldPacket, RowDataPacket } from 'mysql2/promise';

export const DEFAULT_SANDBOX_PREFIX = 'hsdbb_';

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

/**
 * The server-wide named lock (GET_LOCK) a host holds on each sandbox it owns,
 * from before the database exists until after it is dropped. The server
 * releases it when the holder's session ends, so a sandbox whose lock is free
 * belongs to no live host: a killed worker's leftover.
 */
export function ownershipLock(name: string): string {
  return `harness-s:${name}`;
}

export function quoteId(name: string): string {
  return `\`${name.replace(/`/g, '``')}\``;
}

/**
 * Ends every session of a sandbox: those logged in as its user and those
 * (the admin's scoring session included) whose current database is its
 * database. A session left running there would hold the database's metadata
 * lock and make DROP DATABASE wait.
 */
export async function killSessionsOf(admin: AdminQueryable, name: string): Promise<void> {
  const [rows] = await admin.query<RowDataPacket[]>(
    'SELECT ID AS id FROM information_schema.PROCESSLIST WHERE (USER = ? OR DB = ?) AND ID <> CONNECTION_ID()',
    [name, name],
  );
  for (const row of rows) {
    try {
      await admin.query(`KILL ${Number(row.id)}`);
    } catch {
      // The session ended on its own in between.
    }
  }
}

export async function dropSandbox(admin: AdminQueryable, name: string): Promise<void> {
  // Locked first, so no new session can log in between the kills and the drop.
  await admin.query(`ALTER USER IF EXISTS ?@'%' ACCOUNT LOCK`, [name]).catch(() => undefined);
  await killSessionsOf(admin, name);
  await admin.query(`DROP USER IF EXISTS ?@'%'`, [name]);
  await admin.query(`DROP DATABASE IF EXISTS ${quoteId(name)}`);
}
