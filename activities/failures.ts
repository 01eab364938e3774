/**
 * How an activity's error reaches the workflow (workflows/failures.ts acts on it):
 *
 * - an error the user must fix (core/errors.ts UserError: a config, a task
 *   file, a spec, a secret, an endpoint outside its contract), or a request an
 *   endpoint or the trainer refuses for good: non-retryable, so the run fails
 *   at once with its message;
 * - an endpoint that cannot be reached or answers with a server error (the
 *   policy or an inference server: `PolicyUnavailable`, also when no replica
 *   could take a request for a while; the trainer:
 *   `TrainerUnavailable`): retried; once the retries are spent, the run pauses
 *   itself with the reason;
 * - the trainer lost the run's model (`TrainerModelLost`): not retried; the
 *   run restores the model from its latest checkpoint and re-runs the steps
 *   after it;
 * - anything else: retried, then the workflow decides (a rollout group is
 *   recorded as failed).
 *
 * `asWorkflowFailure` is applied once, around every activity (index.ts).
 */
import { ApplicationFailure } from '@temporalio/activity';
import { APIConnectionError, APIError } from 'openai';
import { UserError } from '../core/errors';
import { FAILURE_TYPES } from '../core/failure-types';
import { PublishError } from '../core/policy/publisher';
import { NoReplicaError } from '../core/policy/replica-balancer';
import { SamplerWeightsError } from '../core/trainer/sampler-weights';
import { TrainerError, TrainerModelGoneError } from '../core/trainer/tinker/client';

/** HTTP statuses with which a policy endpoint refuses the request itself (bad model or adapter name, bad key). */
const REFUSED = [400, 401, 403, 404, 422];

export function asWorkflowFailure(err: unknown): never {
  if (err instanceof ApplicationFailure) throw err;
  if (err instanceof UserError) throw ApplicationFailure.nonRetryable(err.message, err.name);
  if (err instanceof APIError && err.status !== undefined && REFUSED.includes(err.status)) {
    throw ApplicationFailure.nonRetryable(`policy endpoint: HTTP ${err.status}: ${err.message}`, FAILURE_TYPES.PolicyRequestRefused);
  }
  if (
    err instanceof APIConnectionError ||
    (err instanceof APIError && err.status !== undefined && (err.status >= 500 || err.status === 429))
  ) {
    throw ApplicationFailure.retryable(`policy endpoint: ${err.message}`, FAILURE_TYPES.PolicyUnavailable);
  }
  // Every replica was out of rotation or lacked the version for a while (core/policy/replica-balancer.ts).
  if (err instanceof NoReplicaError)
    throw ApplicationFailure.retryable(`inference replicas: ${err.message}`, FAILURE_TYPES.PolicyUnavailable);
  if (err instanceof PublishError) {
    if (!err.retryable) throw ApplicationFailure.nonRetryable(err.message, err.name);
    throw ApplicationFailure.retryable(`inference server: ${err.message}`, FAILURE_TYPES.PolicyUnavailable);
  }
  if (err instanceof SamplerWeightsError && !err.retryable) throw ApplicationFailure.nonRetryable(err.message, err.name);
  // The run restores its model from its latest checkpoint (workflows/run.ts); retrying the op cannot help.
  if (err instanceof TrainerModelGoneError)
    throw ApplicationFailure.nonRetryable(err.message, FAILURE_TYPES.TrainerModelLost, { modelId: err.modelId });
  if (err instanceof TrainerError) {
    if (err.category === 'user') throw ApplicationFailure.nonRetryable(err.message, FAILURE_TYPES.TrainerRequestRefused);
    throw ApplicationFailure.retryable(err.message, FAILURE_TYPES.TrainerUnavailable);
  }
  throw err;
}
