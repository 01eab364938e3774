/**
 * Timeouts and retries per task queue. Errors a user must fix (bad config,
 * an endpoint without token ids) are thrown non-retryable by the activities;
 * the rest are retried as the run config's `retry` says (defaults when a
 * config from before it has none).
 */
import type { ActivityOptions, RetryPolicy } from '@temporalio/workflow';
import type { RetryConfig } from '../core/config';
import { TASK_QUEUES } from './definitions';

const DEFAULT_RETRY: RetryConfig = { maxAttempts: 10, maxIntervalSeconds: 30 };

function retryPolicy(retry: RetryConfig | undefined = DEFAULT_RETRY): RetryPolicy {
  return {
    initialInterval: '1s',
    backoffCoefficient: 2,
    maximumInterval: `${retry.maxIntervalSeconds}s`,
    maximumAttempts: retry.maxAttempts,
  };
}

export const controlActivityOptions = (retry?: RetryConfig): ActivityOptions => ({
  taskQueue: TASK_QUEUES.control,
  startToCloseTimeout: '2m',
  retry: retryPolicy(retry),
});

/** A rollout group heartbeats on a clock and after each rollout; a dead worker's group moves on within the heartbeat timeout. */
export const rolloutActivityOptions = (retry?: RetryConfig): ActivityOptions => ({
  taskQueue: TASK_QUEUES.rollout,
  startToCloseTimeout: '30m',
  heartbeatTimeout: '15s',
  retry: retryPolicy(retry),
});

/** The trainer activity heartbeats every 5 s on a clock, also while one trainer request is held for minutes. */
export const trainerActivityOptions = (retry?: RetryConfig): ActivityOptions => ({
  taskQueue: TASK_QUEUES.trainer,
  startToCloseTimeout: '2h',
  heartbeatTimeout: '30s',
  retry: retryPolicy(retry),
});

/**
 * Publishing downloads and unpacks a step's weights and loads them on every
 * inference server: minutes on a big adapter, with a heartbeat clock.
 */
export const publishActivityOptions = (retry?: RetryConfig): ActivityOptions => ({
  taskQueue: TASK_QUEUES.control,
  startToCloseTimeout: '30m',
  heartbeatTimeout: '30s',
  retry: retryPolicy(retry),
});

/**
 * Loading a version on one inference replica: on the control queue, or the
 * queue of the worker beside the replica (publishVia replica-workers), which
 * may be gone with its host: an attempt no worker picks up within a minute
 * fails, and the replica gets the version from its keeper once it is back.
 * A replica that refuses connections is given a few quick tries, not the
 * run's retries: the version goes live on the others meanwhile.
 */
export const replicaLoadOptions = (taskQueue: string, ownQueue: boolean): ActivityOptions => ({
  taskQueue,
  startToCloseTimeout: '30m',
  heartbeatTimeout: '30s',
  ...(ownQueue ? { scheduleToStartTimeout: '1m' } : {}),
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 3 },
});

/**
 * Logging to an experiment tracker (trackRun): the activity catches every
 * failure of the tracker, so retries only cover a worker lost mid-call, and
 * a run's end never waits long for it.
 */
export const trackingActivityOptions = (): ActivityOptions => ({
  taskQueue: TASK_QUEUES.control,
  startToCloseTimeout: '2m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumAttempts: 3 },
});
