/**
 * A worker process: `tsx workers/main.ts [--queues control,rollout,trainer] [--identity NAME] [--replica-url URL]`.
 * Connects to Temporal ($TEMPORAL_ADDRESS) and PostgreSQL ($DATABASE_URL),
 * applies migrations, serves the queues until SIGINT/SIGTERM, and serves its
 * metrics at /metrics on $HARNESS_S_METRICS_PORT (default 9464; `off` for none).
 * Opens at most $HARNESS_S_DB_POOL_SIZE PostgreSQL connections (default 10).
 * Runs with `tracking.mlflow` are logged to $MLFLOW_TRACKING_URI.
 */
import { Command } from 'commander';
import { latencyProfileFromEnv } from '../core/latency-profiles';
import { trackingEndpointsFromEnv } from '../core/tracking/registry';
import { viewerUrlFromEnv } from '../core/viewer-address';
import { NativeConnection } from '@temporalio/worker';
import { databaseUrlFromEnv, dbPoolSizeFromEnv, migrate, RunStore } from '../core/store/run-store';
import { namespaceFromEnv, temporalAddressFromEnv } from './temporal-env';
import { trainerHeartbeatSecondsFromEnv } from '../core/trainer/tinker/sessions';
import { createLogger } from './logger';
import { metricsPortFromEnv, startMetricsServer } from './metrics-server';
import { installQuietTemporalRuntime } from './runtime';
import { ALL_QUEUES, createWorkers, type QueueName } from './worker';

async function main(): Promise<void> {
  const program = new Command('harness-s-worker')
    .option('--queues <list>', 'task queues to serve: control,rollout,trainer', ALL_QUEUES.join(','))
    .option(
      '--identity <name>',
      'how this worker is named in workflow histories (default $HARNESS_S_WORKER_IDENTITY, else pid@host)',
      process.env.HARNESS_S_WORKER_IDENTITY,
    )
    .option(
      '--replica-url <url>',
      'the inference replica beside this worker, as rollout workers reach it (ending in /v1): serve its publish queue and keep it loaded (policy.publishVia replica-workers; default $HARNESS_S_REPLICA_URL)',
      process.env.HARNESS_S_REPLICA_URL || undefined,
    )
    .parse();
  const queues = String(program.opts().queues)
    .split(',')
    .map((q) => q.trim()) as QueueName[];
  const unknown = queues.filter((q) => !ALL_QUEUES.includes(q));
  if (unknown.length) throw new Error(`--queues: unknown queue(s) ${unknown.join(', ')}; use ${ALL_QUEUES.join(', ')}`);
  const replicaUrl: string | undefined = program.opts().replicaUrl;
  if (replicaUrl !== undefined && !/^https?:\/\/[^/]+/.test(replicaUrl))
    throw new Error(`--replica-url: '${replicaUrl}' is not an http(s) URL such as http://10.0.0.2:8000/v1`);

  const logger = createLogger('harness-s-worker');
  const metricsPort = metricsPortFromEnv();
  const dbPoolSize = dbPoolSizeFromEnv();
  // Before the Temporal runtime: it is told where its exporter binds.
  const metrics = metricsPort === null ? null : await startMetricsServer({ port: metricsPort });
  installQuietTemporalRuntime({ prometheusBindAddress: metrics?.temporalBindAddress });
  const databaseUrl = databaseUrlFromEnv();
  await migrate(databaseUrl);
  const store = RunStore.connect(
    databaseUrl,
    (err) => logger.warn({ err: err.message }, 'run store: the database cut an idle connection; the pool reconnects on the next query'),
    dbPoolSize,
  );
  const connection = await NativeConnection.connect({ address: temporalAddressFromEnv() });
  const group = await createWorkers({
    connection,
    namespace: namespaceFromEnv(),
    store,
    logger,
    queues,
    identity: program.opts().identity,
    simLatency: latencyProfileFromEnv(),
    trackingEndpoints: trackingEndpointsFromEnv(),
    viewerUrl: viewerUrlFromEnv(),
    replicaUrl,
    sessionHeartbeatSeconds: trainerHeartbeatSecondsFromEnv(),
  });
  const stop = new AbortController();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => stop.abort());
  logger.info({ queues, temporal: temporalAddressFromEnv(), metricsPort: metrics?.port ?? null, dbPoolSize }, 'worker running');
  process.stdout.write(`${JSON.stringify({ ready: true, queues, metricsPort: metrics?.port ?? null })}\n`);
  await group.run(stop.signal);
  await connection.close();
  await store.close();
  await metrics?.close();
}

main().catch((err) => {
  process.stderr.write(`harness-s-worker: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
