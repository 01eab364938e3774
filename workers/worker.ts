/**
 * The Harness-S workers: `harness-s-control` (workflows and light activities),
 * `harness-s-rollout` (rollout groups) and `harness-s-trainer` (the training
 * step). One process may serve any subset; production scales rollout workers
 * out and runs the trainer queue next to the GPUs.
 */
import path from 'node:path';
import { bundleWorkflowCode, NativeConnection, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createActivities } from '../activities';
import type { RunConfig } from '../core/config';
import type { Environment } from '../core/envs/environment';
import { SimEnvironment } from '../core/envs/sim/environment';
import type { RunStore } from '../core/store/run-store';
import { TASK_QUEUES } from '../workflows/definitions';

export type QueueName = keyof typeof TASK_QUEUES;
export const ALL_QUEUES: QueueName[] = ['control', 'rollout', 'trainer'];
export const WORKFLOWS_PATH = path.join(__dirname, '..', 'workflows', 'index.ts');

/** Environments are built once per world file, then shared by the activities. */
export function environmentCache(): (config: RunConfig) => Environment {
  const cache = new Map<string, Environment>();
  return (config) => {
    const key = `${config.env.kind}:${config.env.world ?? ''}`;
    let env = cache.get(key);
    if (!env) {
      env = SimEnvironment.fromFile(config.env.world);
      cache.set(key, env);
    }
    return env;
  };
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
}

export async function createWorkers(options: WorkerOptions): Promise<Worker[]> {
  const activities = createActivities({ store: options.store, logger: options.logger, environmentFor: environmentCache() });
  const queues = options.queues ?? ALL_QUEUES;
  const workflowBundle = queues.includes('control') ? await buildWorkflowBundle() : undefined;
  return Promise.all(
    queues.map(async (queue) =>
      Worker.create({
        connection: options.connection,
        namespace: options.namespace,
        taskQueue: TASK_QUEUES[queue],
        activities,
        ...(queue === 'control' ? { workflowBundle } : {}),
        maxConcurrentActivityTaskExecutions: queue === 'rollout' ? 64 : queue === 'trainer' ? 2 : 32,
      }),
    ),
  );
}

/** Runs the workers until one stops or the signal aborts. */
export async function runWorkers(workers: Worker[], signal?: AbortSignal): Promise<void> {
  signal?.addEventListener('abort', () => workers.forEach((w) => w.getState() === 'RUNNING' && w.shutdown()));
  await Promise.all(workers.map((w) => w.run()));
}
