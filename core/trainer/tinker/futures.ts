/**
 * The futures protocol of the Tinker API: an op answers with a future, which
 * is polled with the SDK's rules: HTTP 408 and 5xx (and a 200
 * `{type: "try_again"}`) mean "not yet, poll again"; 410 means the future is
 * gone and the op is sent again (its seq_id makes that safe); a failure is a
 * 200 `{error, category}` or an HTTP 400 `{detail}`.
 */
import { countTrainerRetry, timeTrainerOp } from '../../metrics';
import { type FutureResponse, PROTOBUF_CONTENT_TYPE, RequestFailed, TryAgain } from './wire';
import { TrainerError, TrainerModelGoneError } from './errors';
import { type HttpReply, PollTimeout, TinkerTransport } from './transport';

/** Bare 400s tolerated on retrieve_future before it counts as the op's failure (a proxy may inject one). */
const MAX_BAD_REQUEST_POLLS = 3;
/** HTTP 5xx answers to retrieve_future in a row before the op fails (as a server error: the activity's retry polls the same future again). */
const MAX_SERVER_ERROR_POLLS = 30;
/** A failed op's error when the trainer has lost the model (SkyRL: "Model <id> not loaded"); retrying cannot help. */
const MODEL_GONE = /\bmodel\b.*\bnot loaded\b/i;
/** Times a vanished future (404, 410) is sent again before the op fails. */
const MAX_RESUBMITS = 3;

/** Runs an op through its future; TinkerClient's API methods are built on it. */
export abstract class TinkerFutures extends TinkerTransport {
  /**
   * Sends an op (again, when its future is gone) and polls its future until
   * it resolves. `submit` returns null when the op needs no future (see
   * save_weights_for_sampler's 409).
   */
  /** `modelId`: the model the op trains or saves, which a "model not loaded" failure says is gone. */
  protected runFuture(
    op: string,
    submit: () => Promise<FutureResponse | null>,
    modelId?: string,
  ): Promise<{ json?: unknown; proto?: Buffer }> {
    return timeTrainerOp(op, () => this.submitAndPoll(op, submit, modelId));
  }

  private async submitAndPoll(
    op: string,
    submit: () => Promise<FutureResponse | null>,
    modelId?: string,
  ): Promise<{ json?: unknown; proto?: Buffer }> {
    let future = await submit();
    if (future === null) return {};
    let resubmits = 0;
    let badRequests = 0;
    let serverErrors = 0;
    for (;;) {
      const polled = Date.now();
      const reply = await this.withConnectionRetries(op, () => this.retrieve(future!.request_id));
      if (reply === 'poll-again') {
        countTrainerRetry(op, 'poll_timeout');
        continue;
      }
      const { status } = reply;
      if (status < 500) serverErrors = 0;
      if (status === 200 && reply.contentType.startsWith(PROTOBUF_CONTENT_TYPE)) return { proto: reply.body };
      if (status === 200) {
        const json = this.parseBody(op, reply);
        if (TryAgain.safeParse(json).success) {
          countTrainerRetry(op, 'try_again');
          await this.pause(this.options.pollSeconds);
          continue;
        }
        const failed = RequestFailed.safeParse(json);
        if (failed.success) {
          if (MODEL_GONE.test(failed.data.error)) {
            if (modelId) throw new TrainerModelGoneError(this.modelGoneMessage(op, modelId, failed.data.error), modelId);
            throw new TrainerError(
              `trainer ${this.base}: ${op} failed: ${failed.data.error}: the trainer no longer has the model it names`,
              'user',
              true,
            );
          }
          throw new TrainerError(
            `trainer ${this.base}: ${op} failed: ${failed.data.error}`,
            failed.data.category?.toLowerCase() === 'user' ? 'user' : 'server',
            true,
          );
        }
        return { json };
      }
      if (status === 408) {
        // A long poll that ended without a result; one answered at once (a proxy, a server without long polls) is paced.
        countTrainerRetry(op, 'poll_timeout');
        if (Date.now() - polled < 1000) await this.pause(this.options.pollSeconds);
        continue;
      }
      if (status >= 500) {
        if (++serverErrors > MAX_SERVER_ERROR_POLLS) {
          throw new TrainerError(
            `trainer ${this.base}: ${op}: retrieve_future failed ${serverErrors} times in a row: HTTP ${status}: ${this.detail(reply)}`,
            'server',
          );
        }
        countTrainerRetry(op, 'server_error');
        await this.pause(this.options.pollSeconds);
        continue;
      }
      if (status === 429) {
        countTrainerRetry(op, 'rate_limited');
        await this.pause(Math.max(1, this.options.pollSeconds));
        continue;
      }
      if (status === 410 || status === 404) {
        // The future is gone (the server restarted, or expired it): send the op again; its seq_id makes that exactly-once.
        if (++resubmits > MAX_RESUBMITS)
          throw new TrainerError(`trainer ${this.base}: ${op}: its future vanished ${resubmits} times (HTTP ${status})`, 'server');
        countTrainerRetry(op, 'future_gone');
        future = await submit();
        if (future === null) return {};
        continue;
      }
      if (status === 400 && ++badRequests <= MAX_BAD_REQUEST_POLLS) {
        countTrainerRetry(op, 'bad_request');
        continue;
      }
      // A 400 {detail} on retrieve_future is the future's failure (SkyRL); other answers say nothing of the op.
      if (status === 400 && modelId && MODEL_GONE.test(this.detail(reply))) {
        throw new TrainerModelGoneError(this.modelGoneMessage(op, modelId, this.detail(reply)), modelId);
      }
      throw new TrainerError(
        `trainer ${this.base}: ${op} failed: ${this.detail(reply)}`,
        status >= 400 && status < 500 ? 'user' : 'server',
        status === 400,
      );
    }
  }

  /** One retrieve_future request; 'poll-again' when our own timeout ended a long poll (the server may hold it for minutes). */
  private async retrieve(requestId: string): Promise<HttpReply | 'poll-again'> {
    try {
      return await this.send('POST', 'retrieve_future', { request_id: requestId }, { longPoll: true });
    } catch (err) {
      if (err instanceof PollTimeout) return 'poll-again';
      throw err;
    }
  }
}
