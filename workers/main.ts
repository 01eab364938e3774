/**
 * A worker process: `tsx workers/main.ts [--queues control,rollout,trainer]`.
 * Connects to Temporal ($TEMPORAL_ADDRESS) and PostgreSQL ($DATABASE_URL),
 * applies migrations, serves the queues until SIGINT/SIGTERM.
 */
import { Command } from 'commander';
import { NativeConnection } from '@temporalio/worker';
import { databaseUrlFromEnv, migrate, RunStore } from '../core/store/run-store';
import { namespaceFromEnv, temporalAddressFromEnv } from './temporal-env';
import { createLogger } from './logger';
import { installQuietTemporalRuntime } from './runtime';
import { ALL_QUEUES, createWorkers, type QueueName } from './worker';

async function main(): Promise<void> {
  const program = new Command('harness-s-worker')
    .option('--queues <list>', 'task queues to serve: control,rollout,trainer', ALL_QUEUES.join(','))
    .parse();
  const queues = String(program.opts().queues).split(',').map((q) => q.trim()) as QueueName[];
  const unknown = queues.filter((q) => !ALL_QUEUES.includes(q));
  if (unknown.length) throw new Error(`--queues: unknown queue(s) ${unknown.join(', ')}; use ${ALL_QUEUES.join(', ')}`);

  const logger = createLogger('harness-s-worker');
  installQuietTemporalRuntime();
  const databaseUrl = databaseUrlFromEnv();
  await migrate(databaseUrl);
  const store = RunStore.connect(databaseUrl);
  const connection = await NativeConnection.connect({ address: temporalAddressFromEnv() });
  const group = await createWorkers({ connection, namespace: namespaceFromEnv(), store, logger, queues });
  const stop = new AbortController();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => stop.abort());
  logger.info({ queues, temporal: temporalAddressFromEnv() }, 'worker running');
  process.stdout.write(`${JSON.stringify({ ready: true, queues })}\n`);
  await group.run(stop.signal);
  await connection.close();
  await store.close();
}

main().catch((err) => {
  process.stderr.write(`harness-s-worker: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
