/**
 * The run store's database: where it is, how many connections a process
 * opens, and its migrations.
 */
import path from 'node:path';
import { Client, type Pool, type PoolClient } from 'pg';
import { runner } from 'node-pg-migrate';
import { UserError } from '../errors';

export const DEFAULT_DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/harness_s';
const MIGRATIONS_DIR = path.join(__dirname, 'migrations');

export function databaseUrlFromEnv(): string {
  return process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
}

export const DB_POOL_SIZE_VARIABLE = 'HARNESS_S_DB_POOL_SIZE';
/** PostgreSQL connections one process may open when $HARNESS_S_DB_POOL_SIZE is unset (pg's own default). */
export const DEFAULT_DB_POOL_SIZE = 10;
const MAX_DB_POOL_SIZE = 1000;

export class DbPoolSizeError extends UserError {
  override name = 'DbPoolSizeError';
}

/**
 * How many PostgreSQL connections a process's run store may open, from
 * $HARNESS_S_DB_POOL_SIZE (a whole number from 1 to 1000; 10 when unset).
 * Read once at process start; the server's max_connections must cover the
 * sum over every process (docker-compose.yml derives it from this).
 */
export function dbPoolSizeFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = (env[DB_POOL_SIZE_VARIABLE] ?? '').trim();
  if (raw === '') return DEFAULT_DB_POOL_SIZE;
  const size = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isInteger(size) || size < 1 || size > MAX_DB_POOL_SIZE) {
    throw new DbPoolSizeError(
      `${DB_POOL_SIZE_VARIABLE}='${raw}' is not a connection pool size: use a whole number from 1 to ${MAX_DB_POOL_SIZE} (unset: ${DEFAULT_DB_POOL_SIZE})`,
    );
  }
  return size;
}

/** A database URL for messages: its password is never printed. */
export function redactedDatabaseUrl(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return databaseUrl;
  }
}

/** Creates the URL's database when the server does not have it yet. */
/** The PostgreSQL server's version, asked within 2 s (doctor); the server's error as it came when it cannot answer. */
export async function serverVersion(databaseUrl: string): Promise<string> {
  const client = new Client({ connectionString: databaseUrl, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    const { rows } = await client.query('SHOW server_version');
    return rows[0].server_version;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) throw new Error(`DATABASE_URL ${databaseUrl} names no database`);
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) {
      await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
        // Created meanwhile by another process (42P04; 23505 when both inserted into pg_database at once).
        if (err.code !== '42P04' && err.code !== '23505') throw err;
      });
    }
  } finally {
    await client.end();
  }
}

/** How long a process waits for another one's migrations before giving up. */
const MIGRATION_WAIT_MS = 120_000;

/**
 * Applies pending migrations; safe to run from several processes at once
 * (workers started together): node-pg-migrate holds an advisory lock and
 * refuses at once while another process holds it, so this waits for that
 * process and tries again (its migrations are then done).
 */
export async function migrate(databaseUrl: string): Promise<void> {
  await ensureDatabase(databaseUrl);
  const deadline = Date.now() + MIGRATION_WAIT_MS;
  for (;;) {
    try {
      await runner({
        databaseUrl,
        dir: MIGRATIONS_DIR,
        direction: 'up',
        migrationsTable: 'pgmigrations',
        count: Infinity,
        log: () => undefined,
        checkOrder: true,
      });
      return;
    } catch (err) {
      const busy = err instanceof Error && /another migration is already running/i.test(err.message);
      if (!busy || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250 + Math.random() * 250));
    }
  }
}

/** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
export async function transaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  } finally {
    client.release();
  }
}
