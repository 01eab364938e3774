/**
 * The embedded default on one machine: the Temporal dev server, the run store
 * in PostgreSQL, the SIMULATED cluster (policy server and trainer) and the
 * workers for all three task queues.
 */
import path from 'node:path';
import { NativeConnection } from '@temporalio/worker';
import type { Logger } from 'pino';
import { loadSimWorld } from '../core/envs/sim/world';
import { databaseUrlFromEnv, migrate, dbPoolSizeFromEnv, RunStore } from '../core/store/run-store';
import { trackingEndpointsFromEnv } from '../core/tracking/registry';
import { viewerUrlFromEnv } from '../core/viewer-address';
import { LatencyProfileError } from '../core/latency-profiles';
import { LatencyModel, type SimLatencyOptions } from '../sim-cluster/latency';
import { startSimCluster } from '../sim-cluster/server';
import { createWorkers } from '../workers/worker';
import { startMetricsServer } from '../workers/metrics-server';
import { installQuietTemporalRuntime } from '../workers/runtime';
import { namespaceFromEnv } from '../workers/temporal-env';
import { DATA_DIR, startDevServer, type DevServer } from './temporal-dev-server';

export const SIM_CLUSTER_PORT = Number(process.env.HARNESS_S_SIM_PORT || 8765);

/**
 * The sim cluster's latency model from HARNESS_S_SIM_LATENCY (a profile
 * name) and HARNESS_S_SIM_SPEEDUP (default 1); off when the first is unset.
 * Checked here, so a bad name or speedup fails before anything starts.
 */
export function simLatencyFromEnv(env: NodeJS.ProcessEnv = process.env): SimLatencyOptions | undefined {
  const profile = env.HARNESS_S_SIM_LATENCY?.trim();
  const speedupText = env.HARNESS_S_SIM_SPEEDUP?.trim();
  if (!profile) {
    if (speedupText)
      throw new LatencyProfileError('[SIMULATED] HARNESS_S_SIM_SPEEDUP is set but HARNESS_S_SIM_LATENCY (a latency profile name) is not');
    return undefined;
  }
  const speedup = speedupText ? Number(speedupText) : 1;
  if (!Number.isFinite(speedup) || speedup < 1)
    throw new LatencyProfileError(`[SIMULATED] HARNESS_S_SIM_SPEEDUP must be a number >= 1 (got '${speedupText}')`);
  LatencyModel.fromOptions({ profile, speedup });
  return { profile, speedup };
}

export interface EmbeddedStack {
  temporal: DevServer;
  simClusterUrl: string;
  databaseUrl: string;
  /** Resolves when the workers stop. */
  workersDone: Promise<void>;
  stop(): Promise<void>;
}

export async function startEmbeddedStack(options: {
  logger: Logger;
  log: (line: string) => void;
  withSimCluster?: boolean;
  /** The sim cluster's world file (the shipped world when absent); runs on it must name the same file in env.world. */
  world?: string;
  /** Serve the workers' metrics at /metrics on this port (workers/metrics-server.ts); none when absent or null. */
  metricsPort?: number | null;
}): Promise<EmbeddedStack> {
  const { logger, log } = options;
  // Read first: a bad world file fails before anything starts.
  const world = options.withSimCluster === false ? null : loadSimWorld(options.world);
  const latency = world ? simLatencyFromEnv() : undefined;
  // Before the Temporal runtime: it is told where its exporter binds.
  const metrics = options.metricsPort == null ? null : await startMetricsServer({ port: options.metricsPort });
  const withTemporalMetrics = installQuietTemporalRuntime({ prometheusBindAddress: metrics?.temporalBindAddress });
  if (metrics)
    log(
      `metrics at http://127.0.0.1:${metrics.port}/metrics${withTemporalMetrics ? '' : " (without the Temporal SDK's: its runtime was already installed)"}`,
    );
  const temporal = await startDevServer({ log });
  const databaseUrl = databaseUrlFromEnv();
  try {
    await migrate(databaseUrl);
  } catch (err) {
    await temporal.stop();
    throw new Error(
      `PostgreSQL at ${new URL(databaseUrl).host} is not usable: ${(err as Error).message}\n` +
        'Fix: start PostgreSQL, or set DATABASE_URL=postgresql://USER@HOST:PORT/DB to one you can use.',
    );
  }
  log(`run store ready (PostgreSQL ${new URL(databaseUrl).host}${new URL(databaseUrl).pathname})`);
  const store = RunStore.connect(databaseUrl, undefined, dbPoolSizeFromEnv());

  const sim = world
    ? await startSimCluster({
        world,
        dataDir: path.join(DATA_DIR, 'sim-cluster'),
        port: SIM_CLUSTER_PORT,
        logger: logger.child({ simulated: true }),
        latency,
      })
    : null;
  if (sim)
    log(
      `[SIMULATED] sim cluster (policy server + Tinker-compatible trainer) at ${sim.url}, world '${world!.name}'${options.world ? ` (${options.world})` : ''}`,
    );
  if (sim && latency)
    log(
      `[SIMULATED] latency model '${latency.profile}' at speedup ${latency.speedup}: SIMULATED GPU time, report at ${sim.url}/sim/latency`,
    );

  const connection = await NativeConnection.connect({ address: temporal.address });
  // Its workers price sim steps with the profile its sim cluster runs.
  const simLatency = latency ? LatencyModel.fromOptions(latency).profile : null;
  const group = await createWorkers({
    connection,
    namespace: namespaceFromEnv(),
    store,
    logger,
    simLatency,
    trackingEndpoints: trackingEndpointsFromEnv(),
    viewerUrl: viewerUrlFromEnv(),
  });
  const abort = new AbortController();
  const workersDone = group.run(abort.signal);
  log('workers running on harness-s-control, harness-s-rollout, harness-s-trainer');

  return {
    temporal,
    simClusterUrl: sim?.url ?? '',
    databaseUrl,
    workersDone,
    async stop() {
      abort.abort();
      try {
        await workersDone.catch(() => undefined);
        await connection.close().catch(() => undefined);
        await sim?.close().catch(() => undefined);
        await store.close().catch(() => undefined);
      } finally {
        await metrics?.close().catch(() => undefined);
        await temporal.stop();
      }
    },
  };
}
