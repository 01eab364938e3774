/**
 * Slots on servers that several hosts share (a remote OpenEnv server's
 * sessions), counted in one place for every host. Each slot is a lease held
 * by one holder at a time: taken when free or expired, renewed while the
 * episode runs, given back at its end. A holder that dies stops renewing, so
 * its slots come free when their leases expire.
 *
 * The run store keeps the leases (core/store/session-lease-store.ts); a
 * worker passes them to the envs it builds (registration.ts, `EnvServices`).
 */

/** One slot of one server, leased to one holder; `token` is this lease's own, so a stale holder cannot touch a slot taken since. */
export interface SessionLease {
  /** The server, as `serverKey` writes it. */
  server: string;
  /** 0 .. sessions-1. */
  slot: number;
  token: string;
}

/** A server whose slots are leased: its key and how many sessions it takes at once. */
export interface LeasedServer {
  server: string;
  sessions: number;
}

export interface SessionLeases {
  /**
   * Takes a free or expired slot, on the least busy of `servers` that has
   * one, for `holder`, for `leaseMs`; null when every slot is held (or
   * another holder took the last free one at the same moment).
   */
  take(servers: readonly LeasedServer[], holder: string, leaseMs: number): Promise<SessionLease | null>;
  /** Extends the lease by `leaseMs` from now; false when the slot is not this lease's any more (it expired and was taken, or was released). */
  renew(lease: SessionLease, leaseMs: number): Promise<boolean>;
  /** Gives the slot back; nothing happens when the lease is gone already. */
  release(lease: SessionLease): Promise<void>;
}

/** How long a lease lasts unless renewed: a dead holder's slots come free this long after its last renewal. */
export const SESSION_LEASE_MS = 30_000;

/** The leases a worker's envs share with every other host, and who this process is among the holders. */
export interface SharedSessionLeases {
  leases: SessionLeases;
  /** This process, as the leases name their holder (the worker's identity: pid@host by default). */
  holder: string;
  /** How long each lease lasts unless renewed; SESSION_LEASE_MS when absent. */
  leaseMs?: number;
}

/** One key per server however its URL is written (`http://h:80/` and `http://h` are one server). */
export function serverKey(url: string): string {
  const parsed = new URL(url);
  return `${parsed.protocol}//${parsed.host}${parsed.pathname.replace(/\/+$/, '')}`;
}
