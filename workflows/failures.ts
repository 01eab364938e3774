/**
 * What a workflow does with an activity or child that failed for good (after
 * its retries). Three kinds, told apart by the failure's root:
 *
 * - an endpoint outage (the activity wrappers in activities/failures.ts name
 *   them: the policy or an inference server, the trainer): the run pauses
 *   itself with the reason, and a resume runs the same step again, reusing
 *   what the store already holds;
 * - an error a user must fix (non-retryable): the run fails, with that error's
 *   message on top rather than "Child Workflow execution failed";
 * - anything else in one rollout group (a task its environment cannot run):
 *   that group is recorded as failed and the step goes on without it.
 *
 * Workflow code: deterministic, no I/O.
 */
import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure, isCancellation, TemporalFailure } from '@temporalio/workflow';
import { FAILURE_TYPES, OUTAGE_TYPES } from '../core/failure-types';

/** The innermost failure: what actually went wrong under the activity and child wrappers. */
export function rootFailure(err: unknown): Error {
  let current = err as Error;
  while (
    (current instanceof ActivityFailure || current instanceof ChildWorkflowFailure || current instanceof TemporalFailure) &&
    current.cause
  ) {
    current = current.cause;
  }
  return current;
}

/** The outage behind a failure ("PolicyUnavailable: ..."), or null when it is not one. */
export function outageOf(err: unknown): string | null {
  const root = rootFailure(err);
  if (root instanceof ApplicationFailure && (OUTAGE_TYPES as readonly string[]).includes(root.type ?? ''))
    return `${root.type}: ${root.message}`;
  return null;
}

/**
 * The trainer lost the run's model (activities/failures.ts: `TrainerModelLost`):
 * the lost model's id and the trainer's message, or null for another failure.
 */
export function trainerModelLost(err: unknown): { modelId: string | null; message: string } | null {
  const root = rootFailure(err);
  if (!(root instanceof ApplicationFailure) || root.type !== FAILURE_TYPES.TrainerModelLost) return null;
  const details = root.details?.[0] as { modelId?: unknown } | undefined;
  return { modelId: typeof details?.modelId === 'string' ? details.modelId : null, message: root.message };
}

/** Whether a failure is one a retry cannot fix (a user error): the run fails with it. */
export function isFinal(err: unknown): boolean {
  const root = rootFailure(err);
  return root instanceof ApplicationFailure && root.nonRetryable === true;
}

/** The failure to end a run with: its root's message and type on top, where the UI and CLI show it. */
export function runFailure(err: unknown): unknown {
  const root = rootFailure(err);
  if (root === err || !(root instanceof ApplicationFailure)) return err;
  return ApplicationFailure.create({
    message: root.message,
    type: root.type ?? 'Error',
    nonRetryable: true,
    details: root.details ? [...root.details] : undefined,
  });
}

/**
 * One rollout group's activity. A task that fails for good gives
 * `{ failed: reason }` so the caller goes on without it; an outage or a user
 * error is thrown.
 */
export async function groupOrFailure<T>(group: () => Promise<T>): Promise<{ group: T } | { failed: string }> {
  try {
    return { group: await group() };
  } catch (err) {
    if (isCancellation(err) || outageOf(err) !== null || isFinal(err) || !(err instanceof ActivityFailure)) throw err;
    return { failed: rootFailure(err).message };
  }
}
