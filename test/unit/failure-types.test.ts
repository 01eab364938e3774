/**
 * The failures an activity raises (activities/failures.ts) are the ones the
 * workflows act on (workflows/failures.ts): an endpoint that stays down
 * pauses the run, a request refused for good fails it, a model the trainer
 * lost is restored. The workflow tests inject these failures by type; this
 * checks the activity side raises those types.
 */
import { APIConnectionError, APIError } from 'openai';
import { asWorkflowFailure } from '../../activities/failures';
import { RunConfigError } from '../../core/config';
import { FAILURE_TYPES } from '../../core/failure-types';
import { PublishError } from '../../core/policy/publisher';
import { TrainerError, TrainerModelGoneError } from '../../core/trainer/tinker/client';
import { NoCheckpointError } from '../../core/trainer/trainer-restore';
import { isFinal, outageOf, trainerModelLost } from '../../workflows/failures';

/** What an activity throws when `err` escapes it. */
function raised(err: unknown): unknown {
  try {
    asWorkflowFailure(err);
  } catch (thrown) {
    return thrown;
  }
  throw new Error('asWorkflowFailure returned');
}

test.each([
  ['an unreachable policy endpoint', new APIConnectionError({ message: 'Connection error.' }), FAILURE_TYPES.PolicyUnavailable],
  ['a policy endpoint answering 503', new APIError(503, undefined, 'Service Unavailable', new Headers()), FAILURE_TYPES.PolicyUnavailable],
  [
    'an inference server that cannot load the adapter yet',
    new PublishError('http://vllm:8000 is unreachable', true),
    FAILURE_TYPES.PolicyUnavailable,
  ],
  [
    'an unreachable trainer',
    new TrainerError('trainer http://t is unreachable (forward_backward): ECONNREFUSED', 'server'),
    FAILURE_TYPES.TrainerUnavailable,
  ],
])('%s is an outage the run pauses on, named by its type', (_what, err, type) => {
  const failure = raised(err);
  expect(outageOf(failure)).toMatch(new RegExp(`^${type}: `));
  expect(isFinal(failure)).toBe(false);
});

test.each([
  ['a policy endpoint refusing the key', new APIError(401, undefined, 'Unauthorized', new Headers()), FAILURE_TYPES.PolicyRequestRefused],
  [
    'a trainer refusing the request',
    new TrainerError('trainer http://t: LoRA rank 4096 is above the limit', 'user'),
    FAILURE_TYPES.TrainerRequestRefused,
  ],
  [
    'an invalid run config',
    new RunConfigError('run config is invalid:\n  - steps: expected a number', ['steps']),
    FAILURE_TYPES.RunConfigError,
  ],
  ['a fork without a checkpoint', new NoCheckpointError('run r has no checkpoint at or before step 3'), FAILURE_TYPES.NoCheckpointError],
])('%s fails the run at once, with its type', (_what, err, type) => {
  const failure = raised(err);
  expect(failure).toMatchObject({ type, nonRetryable: true });
  expect(isFinal(failure)).toBe(true);
  expect(outageOf(failure)).toBeNull();
});

test('a model the trainer lost is one the run restores, with the lost model id', () => {
  const failure = raised(new TrainerModelGoneError('trainer http://t: forward_backward failed: Model m-1 not loaded', 'm-1'));
  expect(trainerModelLost(failure)).toEqual({ modelId: 'm-1', message: 'trainer http://t: forward_backward failed: Model m-1 not loaded' });
  expect(outageOf(failure)).toBeNull();
});
