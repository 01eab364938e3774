/**
 * The Harness-S workers: `harness-s-control` (workflows and light activities),
 * `harness-s-rollout` (rollout groups) and `harness-s-trainer` (the training
 * step). One process may serve any subset; production scales rollout workers
 * out and runs the trainer queue next to the GPUs.
 */
import path from 'node:path';
import type { LatencyProfile } from './sim-cluster/latency';
import { bundleWorkflowCode, NativeConnection, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createActivities } from '../activities';
import type { RunConfig } from '../core/config';
import type { Environment } from '../core/envs/environment';
import { createEnvironment } from '../core/envs/registry';
import { TrainerSessions } from '../core/rl/tinker/sessions';
import type { RunStore } from '../core/store/run-store';
import { TASK_QUEUES } from '../workflows/definitions';

export type QueueName = keyof typeof TASK_QUEUES;
export const ALL_QUEUES: QueueName[] = ['control', 'rollout', 'trainer'];
export const WORKFLOWS_PATH = path.join(__dirname, '..', 'workflows', 'index.ts');

/** Environments are built once per env config, shared by the activities, closed with the workers. */
export class EnvironmentCache {
  private readonly cache = new Map<string, Environment>();

  get(config: Pick<RunConfig, 'env'>): Environment {
    const key = JSON.stringify(config.env);
    let env = this.cache.get(key);
    if (!env) {
      env = createEnvironment(config.env);
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

export function buildWorkflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quiet as never });
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
}

export interface WorkerGroup {
  workers: Worker[];
  /** Serves the queues until one worker stops or the signal aborts, then closes the environments. */
  run(signal?: AbortSignal): Promise<void>;
}

export async function createWorkers(options: WorkerOptions): Promise<WorkerGroup> {
  const environments = new EnvironmentCache();
  const trainerSessions = new TrainerSessions(options.logger);
  const activities = createActivities({
    store: options.store,
    logger: options.logger,
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
  });
  const queues = options.queues ?? ALL_QUEUES;
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

  return {
    workers,
    async run(signal?: AbortSignal) {
      signal?.addEventListener('abort', () => workers.forEach((w) => w.getState() === 'RUNNING' && w.shutdown()));
      try {
        await Promise.all(workers.map((w) => w.run()));
      } finally {
        trainerSessions.close();
        await environments.closeAll();
      }
    },
  };
}
