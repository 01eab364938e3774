/**
 * What the integration tests run against: the dev server from global-setup,
 * the test database, an in-process SIMULATED cluster on a free port, and
 * in-process workers for all three task queues.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import pino from 'pino';
import type { RunConfigInput } from '../../core/config';
import { loadSimWorld } from '../../core/envs/sim/world';
import { RunStore } from '../../core/store/run-store';
import { startSimCluster, type SimCluster } from '../../sim-cluster/server';
import { createWorkers, type QueueName } from '../../workers/worker';
import { installQuietTemporalRuntime } from '../../workers/runtime';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';

export interface TestStack {
  client: Client;
  store: RunStore;
  sim: SimCluster;
  /** A small sim run config against this stack's sim cluster. */
  config(overrides?: Partial<RunConfigInput>): RunConfigInput;
  /** Starts the stack's workers; `trackingEndpoints` (tracker name -> URL) overrides the stack's for these workers. */
  startWorkers(options?: { trackingEndpoints?: Record<string, string> }): Promise<void>;
  stopWorkers(): Promise<void>;
  close(): Promise<void>;
}

export const silentLogger = pino({ level: 'silent' });

export async function startTestStack(
  options: {
    workers?: boolean;
    queues?: QueueName[];
    trainerOpDelayMs?: number;
    temporalAddress?: string;
    trackingEndpoints?: Record<string, string>;
  } = {},
): Promise<TestStack> {
  installQuietTemporalRuntime();
  const store = RunStore.connect(TEST_DATABASE_URL);
  const sim = await startSimCluster({
    world: loadSimWorld(),
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'harness-s-sim-')),
    logger: silentLogger,
    trainerOpDelayMs: options.trainerOpDelayMs,
  });
  const temporalAddress = options.temporalAddress ?? TEST_TEMPORAL_ADDRESS;
  const connection = await Connection.connect({ address: temporalAddress });
  const client = new Client({ connection });
  let running: { done: Promise<void>; abort: AbortController; connection: NativeConnection } | null = null;

  const stack: TestStack = {
    client,
    store,
    sim,
    config: (overrides = {}) => ({
      name: 'test-run',
      env: { kind: 'sim' },
      steps: 2,
      seed: 7,
      policy: { baseUrl: `${sim.url}/v1` },
      trainer: { baseUrl: sim.url, pollSeconds: 0.02 },
      rollout: { tasksPerStep: 4, groupSize: 4, maxTurns: 5, concurrency: 4 },
      rescue: { enabled: true, k: 2 },
      router: { probeTasksPerKind: 1, probeRollouts: 2 },
      eval: { tasksPerKind: 1, rollouts: 2 },
      ...overrides,
    }),
    async startWorkers(workerOptions = {}) {
      // A second group would replace the first in `running` and outlive close(), polling a stopped server.
      if (running) throw new Error("the test stack's workers are running already (startTestStack starts them unless workers: false)");
      const native = await NativeConnection.connect({ address: temporalAddress });
      const trackingEndpoints = workerOptions.trackingEndpoints ?? options.trackingEndpoints;
      const group = await createWorkers({
        connection: native,
        namespace: 'default',
        store,
        logger: silentLogger,
        queues: options.queues,
        ...(trackingEndpoints ? { trackingEndpoints } : {}),
      });
      const abort = new AbortController();
      running = { abort, connection: native, done: group.run(abort.signal) };
    },
    async stopWorkers() {
      if (!running) return;
      running.abort.abort();
      await running.done;
      await running.connection.close();
      running = null;
    },
    async close() {
      await stack.stopWorkers();
      await connection.close();
      await sim.close();
      await store.close();
    },
  };
  if (options.workers !== false) await stack.startWorkers();
  return stack;
}

/** A run id no other test uses. */
export function uniqueRunId(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.floor(Math.random() * 1e6).toString(36)}`;
}
