/**
 * The errors of the Tinker client. A trainer that no longer has the model an
 * op trains or saves (a future failed with "Model <id> not loaded", or a 404
 * "Model not found") is TrainerModelGoneError: no retry can help; the run
 * restores from a checkpoint.
 */
export class TrainerError extends Error {
  override name = 'TrainerError';
  constructor(
    message: string,
    /** 'user': the request (or the config behind it) is wrong and retrying will not help; 'server': a retry may. */
    readonly category: 'user' | 'server',
    /**
     * True when the trainer answered the op's future with a failure: the op
     * was not applied, and its seq_id keeps answering with that failure, so a
     * retry must send it under a new seq_id. False when the outcome is unknown
     * (unreachable, no answer): a retry sends it under the same seq_id.
     */
    readonly opFailed = false,
  ) {
    super(message);
  }
}

/**
 * The trainer no longer has the model (it restarted, a node died, or the
 * session that owned it went silent past the trainer's timeout): retrying the
 * op cannot help; the run restores its model from a checkpoint.
 */
export class TrainerModelGoneError extends TrainerError {
  override name = 'TrainerModelGoneError';
  constructor(
    message: string,
    readonly modelId: string,
  ) {
    super(message, 'user', true);
  }
}
