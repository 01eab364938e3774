/**
 * How an activity's error reaches the workflow. An error the user must fix
 * (core/errors.ts UserError: a config, a task file, a spec, a secret, an
 * endpoint outside its contract) or a request an endpoint refuses for good
 * fails the run at once, non-retryable, with its message; anything else is
 * retried by the activity's retry policy. `asNonRetryable` is applied once,
 * around every activity (index.ts); `asTrainerFailure` adds the trainer's own
 * refusals.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { APIError } from 'openai';
import { UserError } from '../core/errors';
import { TrainerError } from '../core/rl/tinker/client';

/** HTTP statuses with which a policy endpoint refuses the request itself (bad model or adapter name, bad key). */
const REFUSED = [400, 401, 403, 404, 422];

export function asNonRetryable(err: unknown): never {
  if (err instanceof UserError) throw ApplicationFailure.nonRetryable(err.message, err.name);
  if (err instanceof APIError && err.status !== undefined && REFUSED.includes(err.status)) {
    throw ApplicationFailure.nonRetryable(`policy endpoint: HTTP ${err.status}: ${err.message}`, 'PolicyRequestRefused');
  }
  throw err;
}

/** Trainer errors a user must fix fail the run at once; the rest are retried (user errors: asNonRetryable, around every activity). */
export function asTrainerFailure(err: unknown): never {
  if (err instanceof TrainerError && err.category === 'user') throw ApplicationFailure.nonRetryable(err.message, 'TrainerRequestRefused');
  throw err;
}
