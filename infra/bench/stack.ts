/**
 * What `harness-s bench` runs on: the embedded stack's parts (infra/embedded-
 * stack.ts) but private, so nothing else touches what is measured: a Temporal
 * dev server on a free port with its own SQLite file (a `harness-s dev` on
 * the default port and its workers, or another dev server on the same file,
 * would otherwise take the bench's tasks), the run store (PostgreSQL,
 * $DATABASE_URL) and in-process workers for the three queues. The bench
 * starts its own sim clusters.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import type { Logger } from 'pino';
import { databaseUrlFromEnv, migrate, dbPoolSizeFromEnv, RunStore } from '../../core/store/run-store';
import { installQuietTemporalRuntime } from '../../workers/runtime';
import { namespaceFromEnv } from '../../workers/temporal-env';
import { createWorkers } from '../../workers/worker';
import { startDevServer } from '../temporal-dev-server';

export interface BenchStack {
  client: Client;
  store: RunStore;
  /** The dev server's Web UI, while the bench runs. */
  uiUrl: string;
  stop(): Promise<void>;
}

/** A port free now; `plus` (the dev server's UI port offset) must be free too. */
async function freePort(plus: number): Promise<number> {
  const listen = (port: number) =>
    new Promise<number | null>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(null));
      server.listen(port, '127.0.0.1', () => {
        const bound = (server.address() as { port: number }).port;
        server.close(() => resolve(bound));
      });
    });
  for (let tries = 0; tries < 20; tries++) {
    const port = await listen(0);
    if (port !== null && port + plus < 65536 && (await listen(port + plus)) !== null) return port;
  }
  throw new Error("no free port pair for the bench's Temporal dev server");
}

export async function startBenchStack(options: { logger: Logger; log: (line: string) => void }): Promise<BenchStack> {
  const { logger, log } = options;
  installQuietTemporalRuntime();
  const databaseUrl = databaseUrlFromEnv();
  try {
    await migrate(databaseUrl);
  } catch (err) {
    throw new Error(
      `PostgreSQL at ${new URL(databaseUrl).host} is not usable: ${(err as Error).message}\n` +
        'Fix: start PostgreSQL, or set DATABASE_URL=postgresql://USER@HOST:PORT/DB to one you can use.',
    );
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-bench-temporal-'));
  const temporal = await startDevServer({
    address: `127.0.0.1:${await freePort(1000)}`,
    dbFile: path.join(dir, 'temporal.sqlite'),
    logFile: path.join(dir, 'temporal.log'),
    log,
  });
  const namespace = namespaceFromEnv();
  const store = RunStore.connect(databaseUrl, undefined, dbPoolSizeFromEnv());
  const native = await NativeConnection.connect({ address: temporal.address });
  const connection = await Connection.connect({ address: temporal.address });
  const group = await createWorkers({ connection: native, namespace, store, logger });
  const abort = new AbortController();
  const workersDone = group.run(abort.signal);
  log(`run store ready (PostgreSQL ${new URL(databaseUrl).host}${new URL(databaseUrl).pathname}); workers running on the three queues`);
  return {
    client: new Client({ connection, namespace }),
    store,
    uiUrl: temporal.uiUrl,
    async stop() {
      abort.abort();
      try {
        await workersDone.catch(() => undefined);
        await native.close().catch(() => undefined);
        await connection.close().catch(() => undefined);
        await store.close().catch(() => undefined);
      } finally {
        await temporal.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
