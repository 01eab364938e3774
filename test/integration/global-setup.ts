/**
 * Starts a Temporal dev server for the integration tests with the project's
 * own script, on its own port and SQLite file, prepares the test database, and
 * installs the real CPU stack for the real-engine tests (engines setup).
 * History limits are lowered so runs exercise continue-as-new.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { migrate } from '../../core/store/run-store';
import { startDevServer } from '../../infra/temporal-dev-server';
import { setupEngines } from '../../infra/engines/install';
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
  // The real CPU stack (reused from its cache; installed on a machine's first run, about 3 minutes).
  await setupEngines((line) => process.stderr.write(`[global-setup] ${line}\n`));
}
