/**
 * The admin's side of sandboxes, shared by their setup and teardown and by
 * the sweeper: names that carry a prefix and their creation time (so a
 * sweeper can date what a dead worker left behind), identifier quoting, and
 * ending a user's sessions.
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

export function quoteId(name: string): string {
  return `\`${name.replace(/`/g, '``')}\``;
}

export async function killSessionsOf(admin: AdminQueryable, user: string): Promise<void> {
  const [rows] = await admin.query<RowDataPacket[]>('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE USER = ?', [user]);
  for (const row of rows) {
    try {
      await admin.query(`KILL ${Number(row.id)}`);
    } catch {
      // The session ended on its own in between.
    }
  }
}
