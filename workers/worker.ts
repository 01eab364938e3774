/**
 * The Harness-S workers: `harness-s-control` (workflows and light activities),
 * `harness-s-rollout` (rollout groups) and `harness-s-trainer` (the training
 * step). One process may serve any subset; production scales rollout workers
 * out and runs the trainer queue next to the GPUs.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { LatencyProfile } from '../core/latency-profiles';
import { bundleWorkflowCode, NativeConnection, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Logger } from 'pino';
import { type ActivityDeps, createActivities, replicaKeeperLoads } from '../activities';
import { ReplicaBalancer } from '../core/policy/replica-balancer';
import { replicaTaskQueue, replicaUrl } from '../core/policy/replicas';
import { ReplicaKeeper } from '../core/publish/replica-keeper';
import type { RunConfig } from '../core/config';
import type { Environment } from '../core/harness/environment';
import type { EnvServices } from '../core/envs/registration';
import { createEnvironment } from '../core/envs/registry';
import { processSettings } from '../core/settings';
import { keepLiveRunSessions, SESSION_HEARTBEAT_SECONDS, TrainerSessions } from '../core/trainer/tinker/sessions';
import type { RunStore } from '../core/store/run-store';
import { TASK_QUEUES } from '../workflows/definitions';

export type QueueName = keyof typeof TASK_QUEUES;
export const ALL_QUEUES: QueueName[] = ['control', 'rollout', 'trainer'];
export const WORKFLOWS_PATH = path.join(__dirname, '..', 'workflows', 'index.ts');

/** Environments are built once per env config, shared by the activities, closed with the workers; `services`: what they share with other hosts. */
export class EnvironmentCache {
  private readonly cache = new Map<string, Environment>();

  constructor(private readonly services: EnvServices = {}) {}

  get(config: Pick<RunConfig, 'env'>): Environment {
    const key = JSON.stringify(config.env);
    let env = this.cache.get(key);
    if (!env) {
      env = createEnvironment(config.env, processSettings(), this.services);
      this.cache.set(key, env);
    }
    return env;
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.cache.values()].map((env) => env.close?.()));
    this.cache.clear();
  }
}

/** Webpack's chatter stays out of the user's terminal. */
const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} };

/**
 * The file `npm test` writes the workflow bundle to once (test/build-workflow-bundle.ts), so that its workers
 * and worker processes do not each run webpack over the same code.
 */
export const WORKFLOW_BUNDLE_FILE_VARIABLE = 'HARNESS_S_WORKFLOW_BUNDLE';

let bundled: Promise<WorkflowBundleWithSourceMap> | undefined;

/** The workflow code bundled by webpack, once per process (or read from $HARNESS_S_WORKFLOW_BUNDLE when set). */
export function buildWorkflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  const file = process.env[WORKFLOW_BUNDLE_FILE_VARIABLE];
  bundled ??= file
    ? readFile(file, 'utf8').then((text) => JSON.parse(text) as WorkflowBundleWithSourceMap)
    : bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quiet as never });
  return bundled;
}

export interface WorkerOptions {
  connection: NativeConnection;
  namespace: string;
  store: RunStore;
  logger: Logger;
  queues?: QueueName[];
  /** Where sampler weights are unpacked for the inference servers; $HARNESS_S_ADAPTER_DIR or .data/adapters when absent. */
  adapterDir?: string;
  /** How this process is named in workflow histories (who ran each activity); Temporal's pid@host when absent. */
  identity?: string;
  /** The sim cluster's latency profile, to price sim steps in SIMULATED GPU-seconds (latencyProfileFromEnv at process start). */
  simLatency?: LatencyProfile | null;
  /** Where users open the trajectory viewer (viewerUrlFromEnv at process start): a run's Temporal page links there. */
  viewerUrl?: string | null;
  /** Where each experiment tracker's server is (trackingEndpointsFromEnv at process start): runs with `tracking` log there. */
  trackingEndpoints?: Readonly<Record<string, string>>;
  /** How often trainer sessions are heartbeated and the live runs' sessions read (SESSION_HEARTBEAT_SECONDS; tests shorten it). */
  sessionHeartbeatSeconds?: number;
  /**
   * The inference replica beside this worker, by the URL rollout workers reach it at (`--replica-url`): the
   * worker serves its own task queue (harness-s-replica@host:port), where runs with `policy.publishVia:
   * replica-workers` load their versions into it, and keeps it serving them after a restart.
   */
  replicaUrl?: string;
}

export interface WorkerGroup {
  workers: Worker[];
  /** Serves the queues until one worker stops or the signal aborts, then closes the environments. */
  run(signal?: AbortSignal): Promise<void>;
}

export async function createWorkers(options: WorkerOptions): Promise<WorkerGroup> {
  const heartbeatSeconds = options.sessionHeartbeatSeconds ?? SESSION_HEARTBEAT_SECONDS;
  const trainerSessions = new TrainerSessions(options.logger, heartbeatSeconds);
  const workerName = options.identity ?? `${process.pid}@${os.hostname()}`;
  // Remote env servers' sessions are counted in the run store, so every host's workers keep to one limit together.
  const environments = new EnvironmentCache({ sessionLeases: { leases: options.store.sessionLeases, holder: workerName } });
  const balancer = new ReplicaBalancer({ readiness: options.store.replicas, logger: options.logger });
  const activityDeps: ActivityDeps = {
    store: options.store,
    logger: options.logger,
    workerName,
    balancer,
    environmentFor: (config) => environments.get(config),
    trainerSessions,
    adapterDir: options.adapterDir,
    simLatency: options.simLatency ?? null,
    trackingEndpoints: options.trackingEndpoints ?? {},
    viewerUrl: options.viewerUrl ?? null,
    runReport: async (runId) => {
      // The page `harness-s report` writes; loaded when a run ends with a tracker, not at worker start.
      const { loadRunReport, runReportPage } = await import('../core/report/run-report');
      return runReportPage(await loadRunReport(options.store, runId));
    },
  };
  const activities = createActivities(activityDeps);
  const queues = options.queues ?? ALL_QUEUES;
  // Keepers load what replicas lost: a control worker those that share its adapter folder, a replica worker its own.
  const keeperLoads = replicaKeeperLoads(activityDeps);
  // Each keeper its own name in the store's claims, even two worker groups in one process.
  const keeperName = `${workerName}/keeper-${randomUUID().slice(0, 8)}`;
  const keepers = [
    ...(queues.includes('control')
      ? [
          new ReplicaKeeper({
            replicas: options.store.replicas,
            logger: options.logger,
            via: 'shared-storage',
            loadDeps: keeperLoads,
            holder: keeperName,
          }),
        ]
      : []),
    ...(options.replicaUrl
      ? [
          new ReplicaKeeper({
            replicas: options.store.replicas,
            logger: options.logger,
            via: 'replica-workers',
            replica: replicaUrl(options.replicaUrl),
            loadDeps: keeperLoads,
            holder: keeperName,
          }),
        ]
      : []),
  ];
  const replicaWorker = options.replicaUrl
    ? [
        await Worker.create({
          connection: options.connection,
          namespace: options.namespace,
          taskQueue: replicaTaskQueue(replicaUrl(options.replicaUrl)),
          activities,
          ...(options.identity ? { identity: options.identity } : {}),
          maxConcurrentActivityTaskExecutions: 4,
          shutdownGraceTime: '10s',
        }),
      ]
    : [];
  const workflowBundle = queues.includes('control') ? await buildWorkflowBundle() : undefined;
  const workers = await Promise.all(
    queues.map(async (queue) =>
      Worker.create({
        connection: options.connection,
        namespace: options.namespace,
        taskQueue: TASK_QUEUES[queue],
        activities,
        ...(queue === 'control' ? { workflowBundle } : {}),
        ...(options.identity ? { identity: options.identity } : {}),
        maxConcurrentActivityTaskExecutions: queue === 'rollout' ? 64 : queue === 'trainer' ? 2 : 32,
        // On shutdown, activities get this long to finish before they are cancelled; a retry resumes them.
        shutdownGraceTime: '10s',
      }),
    ),
  );

  workers.push(...replicaWorker);

  return {
    workers,
    async run(signal?: AbortSignal) {
      signal?.addEventListener('abort', () => workers.forEach((w) => w.getState() === 'RUNNING' && w.shutdown()));
      for (const keeper of keepers) keeper.start();
      // Every trainer worker keeps every live run's trainer session alive, whoever created its model.
      const liveRunSessions = queues.includes('trainer')
        ? keepLiveRunSessions({ sessions: trainerSessions, store: options.store, logger: options.logger, everySeconds: heartbeatSeconds })
        : null;
      try {
        await Promise.all(workers.map((w) => w.run()));
      } finally {
        await Promise.all(keepers.map((k) => k.close()));
        balancer.close();
        liveRunSessions?.close();
        trainerSessions.close();
        await environments.closeAll();
      }
    },
  };
}
