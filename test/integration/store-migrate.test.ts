/**
 * Worker processes started together (as in a deployment, or the scale-out
 * chaos case) all migrate the run store at once: every one of them must come
 * up, not only the one that holds the migration lock.
 */
import { Client } from 'pg';
import { migrate } from '../../core/store/run-store';
import { TEST_DATABASE_URL } from './env';

test('several processes migrating a new run store at once all succeed, and the store is migrated once', async () => {
  const url = new URL(TEST_DATABASE_URL);
  const name = `harness_s_migrate_${Date.now().toString(36)}`;
  url.pathname = `/${name}`;
  const admin = new Client({ connectionString: new URL('/postgres', TEST_DATABASE_URL).toString() });
  await admin.connect();
  try {
    const results = await Promise.allSettled(Array.from({ length: 4 }, () => migrate(url.toString())));
    expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok', 'ok', 'ok']);
    const store = new Client({ connectionString: url.toString() });
    await store.connect();
    try {
      const { rows } = await store.query<{ name: string; n: number }>('SELECT name, count(*)::int AS n FROM pgmigrations GROUP BY name');
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.every((r) => r.n === 1)).toBe(true);
    } finally {
      await store.end();
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.end();
  }
});
