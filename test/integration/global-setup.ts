/**
 * Starts a Temporal dev server for the integration tests with the project's
 * own script, on its own port and SQLite file, and prepares the test database.
 * History limits are lowered so runs exercise continue-as-new. The real CPU
 * stack is installed by the files that use it (engines.ts), not here: a single
 * integration test needs no 10 GB install.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { migrate } from '../../core/store/run-store';
import { startDevServer } from '../../infra/temporal-dev-server';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';

export default async function globalSetup(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-test-'));
  const server = await startDevServer({
    address: TEST_TEMPORAL_ADDRESS,
    dbFile: path.join(dir, 'temporal.sqlite'),
    logFile: path.join(dir, 'temporal.log'),
    dynamicConfig: { 'limit.historyCount.suggestContinueAsNew': 25 },
    log: (line) => process.stderr.write(`[global-setup] ${line}\n`),
  });
  (globalThis as Record<string, unknown>).__temporalDevServer = server;
  process.env.TEMPORAL_ADDRESS = TEST_TEMPORAL_ADDRESS;
  process.env.DATABASE_URL = TEST_DATABASE_URL;
  // Workers unpack sampler weights here for the inference servers, not into the project's .data.
  process.env.HARNESS_S_ADAPTER_DIR = path.join(dir, 'adapters');
  await migrate(TEST_DATABASE_URL);
}
