/**
 * Leases on the session slots of servers every host shares (session_leases,
 * migration ..._session-leases.sql): the one place remote OpenEnv servers'
 * sessions are counted (core/envs/session-leases.ts says how they are used).
 * A slot is taken in one statement, so two hosts never hold one slot; every
 * time is the database's clock.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { LeasedServer, SessionLease, SessionLeases } from '../envs/session-leases';

export interface HeldSessionLease extends SessionLease {
  holder: string;
  expiresAt: Date;
}

export class SessionLeaseStore implements SessionLeases {
  constructor(private readonly pool: Pool) {}

  async take(servers: readonly LeasedServer[], holder: string, leaseMs: number): Promise<SessionLease | null> {
    if (servers.length === 0) return null;
    const token = randomUUID();
    // The least busy server with a free slot, a random free slot of it (so hosts asking at once seldom pick the same one).
    // Two hosts that still pick one slot meet in ON CONFLICT: the second sees the first's live lease and takes nothing.
    const { rows } = await this.pool.query(
      `WITH wanted AS (
         SELECT server, sessions FROM unnest($1::text[], $2::int[]) AS w (server, sessions)
       ), load AS (
         SELECT w.server, w.sessions, count(l.slot) FILTER (WHERE l.expires_at > now() AND l.slot < w.sessions) AS held
         FROM wanted w LEFT JOIN session_leases l ON l.server = w.server
         GROUP BY w.server, w.sessions
       ), candidate AS (
         SELECT ld.server, s.slot
         FROM load ld CROSS JOIN LATERAL generate_series(0, ld.sessions - 1) AS s (slot)
         WHERE ld.held < ld.sessions
           AND NOT EXISTS (SELECT 1 FROM session_leases l WHERE l.server = ld.server AND l.slot = s.slot AND l.expires_at > now())
         ORDER BY ld.held::float8 / ld.sessions, random()
         LIMIT 1
       )
       INSERT INTO session_leases (server, slot, holder, token, expires_at)
       SELECT server, slot, $3, $4, now() + $5 * interval '1 millisecond' FROM candidate
       ON CONFLICT (server, slot) DO UPDATE
         SET holder = EXCLUDED.holder, token = EXCLUDED.token, taken_at = now(), expires_at = EXCLUDED.expires_at
         WHERE session_leases.expires_at <= now()
       RETURNING server, slot`,
      [servers.map((s) => s.server), servers.map((s) => s.sessions), holder, token, leaseMs],
    );
    return rows.length === 0 ? null : { server: rows[0].server, slot: rows[0].slot, token };
  }

  /** A lease past its expiry that no one has taken since (its token is still there) is this holder's again. */
  async renew(lease: SessionLease, leaseMs: number): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE session_leases SET expires_at = now() + $4 * interval '1 millisecond'
       WHERE server = $1 AND slot = $2 AND token = $3`,
      [lease.server, lease.slot, lease.token, leaseMs],
    );
    return rowCount === 1;
  }

  async release(lease: SessionLease): Promise<void> {
    await this.pool.query('DELETE FROM session_leases WHERE server = $1 AND slot = $2 AND token = $3', [
      lease.server,
      lease.slot,
      lease.token,
    ]);
  }

  /** The leases of `server` still live, by slot: who holds its sessions now, and until when. */
  async live(server: string): Promise<HeldSessionLease[]> {
    const { rows } = await this.pool.query('SELECT * FROM session_leases WHERE server = $1 AND expires_at > now() ORDER BY slot', [server]);
    return rows.map((r) => ({ server: r.server, slot: r.slot, token: r.token, holder: r.holder, expiresAt: r.expires_at }));
  }
}
