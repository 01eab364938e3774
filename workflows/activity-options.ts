/**
 * Timeouts and retries per task queue. Errors a user must fix (bad config,
 * an endpoint without token ids) are thrown non-retryable by the activities.
 */
import type { ActivityOptions, RetryPolicy } from '@temporalio/workflow';
import { TASK_QUEUES } from './definitions';

const retry: RetryPolicy = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s', maximumAttempts: 10 };

export const controlActivityOptions: ActivityOptions = {
  taskQueue: TASK_QUEUES.control,
  startToCloseTimeout: '2m',
  retry,
};

/** A rollout group heartbeats on a clock and after each rollout; a dead worker's group moves on within the heartbeat timeout. */
export const rolloutActivityOptions: ActivityOptions = {
  taskQueue: TASK_QUEUES.rollout,
  startToCloseTimeout: '30m',
  heartbeatTimeout: '15s',
  retry,
};

/** The trainer activity heartbeats every 5 s on a clock, also while one trainer request is held for minutes. */
export const trainerActivityOptions: ActivityOptions = {
  taskQueue: TASK_QUEUES.trainer,
  startToCloseTimeout: '2h',
  heartbeatTimeout: '30s',
  retry,
};

/**
 * Publishing downloads and unpacks a step's weights and loads them on every
 * inference server: minutes on a big adapter, with a heartbeat clock.
 */
export const publishActivityOptions: ActivityOptions = {
  taskQueue: TASK_QUEUES.control,
  startToCloseTimeout: '30m',
  heartbeatTimeout: '30s',
  retry,
};
