/**
 * The SIMULATED trainer's sampling routes (trainer-server.ts routes to them):
 * sampling sessions, and samples from the base policy or from saved sampler
 * weights, answered as protobuf through a future.
 */
import { randomBytes } from 'node:crypto';
import { SimPolicyInputError, seededRandom } from '../core/envs/sim/policy-model';
import { END } from '../core/envs/sim/tokenizer';
import { encodeSampleResult, parseTinkerPath } from '../core/trainer/tinker/wire';
import type { FutureRecord } from './checkpoints';
import { forwardLogprobs } from './learning-rule';
import type { SimHttpReply } from './http';
import { CreateSamplingSessionBody, SampleBody, datumOf, invalid, protoBase64 } from './trainer-requests';
import { SimTrainerCheckpoints } from './trainer-checkpoint-routes';

export abstract class SimTrainerSampling extends SimTrainerCheckpoints {
  protected createSamplingSession(rawBody: unknown): SimHttpReply {
    const parsed = CreateSamplingSessionBody.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    if (!this.sessions[parsed.data.session_id]) return { status: 404, json: { detail: 'Session not found' } };
    const id = `sampling_${randomBytes(4).toString('hex')}`;
    this.samplingSessions.set(id, { sessionId: parsed.data.session_id, basePath: parsed.data.model_path ?? null });
    return { status: 200, json: { type: 'create_sampling_session', sampling_session_id: id } };
  }

  protected getSampler(samplerId: string): SimHttpReply {
    const sampler = this.samplingSessions.get(samplerId);
    if (!sampler) return { status: 404, json: { detail: 'Sampler not found' } };
    return { status: 200, json: { sampler_id: samplerId, base_model: this.deps.world.model.name, model_path: sampler.basePath } };
  }

  /** Samples from the base policy or from saved sampler weights; the result is protobuf. */
  protected async sample(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = SampleBody.safeParse(rawBody);
    if (!parsed.success) return invalid(parsed.error);
    const body = parsed.data;
    const session = body.sampling_session_id ? this.samplingSessions.get(body.sampling_session_id) : undefined;
    if (body.sampling_session_id && !session) return { status: 404, json: { detail: 'Sampling session not found' } };
    const modelPath = session ? session.basePath : (body.model_path ?? null);
    let params = this.baseParams;
    if (modelPath) {
      const location = parseTinkerPath(modelPath);
      const saved = location && (await this.deps.store.readSamplerWeights(location.modelId, location.name));
      if (!saved) return this.badRequest(`model_path '${modelPath}' names no saved sampler weights`);
      params = saved.params;
    } else if (body.base_model && body.base_model !== this.deps.world.model.name) {
      return this.badRequest(`base_model: '${body.base_model}' is not served here`);
    }
    const requestId = `${Date.now()}${randomBytes(3).readUIntBE(0, 3)}`;
    this.futures.set(requestId, { status: 'pending', waiters: [] });
    const prompt = body.prompt.chunks.flatMap((c) => c.tokens);
    setImmediate(() => {
      let result: FutureRecord['result'];
      try {
        const sequences = Array.from({ length: body.num_samples }, (_, i) => {
          const random = body.sampling_params.seed != null ? seededRandom(body.sampling_params.seed + i, prompt.length) : Math.random;
          const generated = this.model.generate(params, prompt, {
            temperature: body.sampling_params.temperature,
            maxTokens: body.sampling_params.max_tokens,
            random,
          });
          const stopped = generated.at(-1)?.id === this.model.tokenizer.id(END);
          return {
            stop_reason: stopped ? ('stop' as const) : ('length' as const),
            tokens: generated.map((t) => t.id),
            logprobs: generated.map((t) => t.logprob),
          };
        });
        const promptLogprobs = body.prompt_logprobs ? [null, ...forwardLogprobs(this.model, params, [datumOf(prompt)])[0]] : null;
        result = { proto: protoBase64(encodeSampleResult({ sequences, prompt_logprobs: promptLogprobs })) };
      } catch (err) {
        result =
          err instanceof SimPolicyInputError
            ? { error: `prompt: ${err.message}`, category: 'user' }
            : { error: (err as Error).message, category: 'server' };
      }
      this.finishFuture({ requestId, modelId: '', route: 'sample', finishedAt: new Date().toISOString(), result });
    });
    return { status: 200, json: { future_id: requestId, request_id: requestId, status: 'pending' } };
  }
}
