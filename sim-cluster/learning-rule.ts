/**
 * The SIMULATED trainer's learning rule, apart from its HTTP and futures
 * code: Tinker's importance-sampling loss and its gradient over the sim
 * policy's parameters, a forward pass, and one AdamW step. Pure functions.
 */
import { type PolicyParams, SimPolicyInputError, type SimPolicyModel, addGradient } from '../core/envs/sim/policy-model';
import type { AdamParams, WireDatum } from '../core/trainer/tinker/wire';

/** A failure the caller caused; its future fails as the caller's error. */
export class SimTrainerUserError extends Error {}

export const SUPPORTED_LOSSES = ['importance_sampling', 'cross_entropy'] as const;

export function datumTokens(datum: WireDatum): number[] {
  return datum.model_input.chunks.flatMap((chunk) => chunk.tokens);
}

/**
 * log p(target | prefix) under `params`. A position the sim policy cannot
 * have produced is an error only when `required` (it carries advantage);
 * otherwise (prompt and observation tokens) it is skipped: undefined.
 */
function positionLogprob(model: SimPolicyModel, params: PolicyParams, prefix: number[], target: number, required: boolean, where: string) {
  try {
    const position = model.logprobAndGrad(params, prefix, target);
    if (position.logprob !== -Infinity) return position;
    if (!required) return undefined;
    throw new SimTrainerUserError(
      `${where}: target token '${model.tokenizer.token(target)}' can never follow this prefix, yet it has a nonzero advantage`,
    );
  } catch (err) {
    if (!(err instanceof SimPolicyInputError)) throw err;
    if (!required) return undefined;
    throw new SimTrainerUserError(`${where}: ${err.message}`);
  }
}

/** Per datum, the log-prob of each target token (0 where the sim policy does not produce the token: prompt and observations). */
export function forwardLogprobs(model: SimPolicyModel, params: PolicyParams, data: readonly WireDatum[]): number[][] {
  return data.map((datum, i) => {
    const tokens = datumTokens(datum);
    const targets = datum.loss_fn_inputs.target_tokens.data;
    return tokens.map((_, t) => {
      if (model.slotAt(tokens.slice(Math.max(0, t - 1), t + 1)) === 'end') return 0;
      return positionLogprob(model, params, tokens.slice(0, t + 1), targets[t], false, `datum ${i}, position ${t}`)?.logprob ?? 0;
    });
  });
}

/**
 * Tinker's importance-sampling loss, summed over positions and datums:
 *   loss = -sum_t exp(logp_new_t - logp_sampling_t) * A_t
 * where logp_new_t is the log-prob of target_tokens[t] after input tokens
 * [0..t]. Positions with A_t = 0 contribute nothing. Returns the gradient
 * -ratio_t * A_t * grad(logp_new_t) added to `grad` (a copy), the loss, and
 * the per-datum log-probs under `params` (what the trainer reports back).
 */
export function importanceSamplingStep(
  model: SimPolicyModel,
  params: PolicyParams,
  grad: PolicyParams,
  data: readonly WireDatum[],
): { grad: PolicyParams; lossSum: number; logprobs: number[][] } {
  const next = structuredClone(grad);
  let lossSum = 0;
  const logprobs = data.map((datum, i) => {
    const tokens = datumTokens(datum);
    const targets = datum.loss_fn_inputs.target_tokens.data;
    const sampling = datum.loss_fn_inputs.logprobs.data;
    const advantages = datum.loss_fn_inputs.advantages.data;
    const out = new Array<number>(tokens.length).fill(0);
    for (let t = 0; t < tokens.length; t++) {
      const modelSlot = model.slotAt(tokens.slice(Math.max(0, t - 1), t + 1)) !== 'end';
      if (!modelSlot && advantages[t] === 0) continue;
      const position = positionLogprob(model, params, tokens.slice(0, t + 1), targets[t], advantages[t] !== 0, `datum ${i}, position ${t}`);
      if (!position) continue;
      if (modelSlot) out[t] = position.logprob;
      if (advantages[t] !== 0) {
        const ratio = Math.exp(position.logprob - sampling[t]);
        lossSum -= ratio * advantages[t];
        addGradient(next, position.grad, -ratio * advantages[t]);
      }
    }
    return out;
  });
  return { grad: next, lossSum, logprobs };
}

export interface AdamVectors {
  params: number[];
  grad: number[];
  m: number[];
  v: number[];
}

/**
 * One AdamW step (PyTorch's formulation, bias-corrected, decoupled weight
 * decay), t = step (1-based):
 *   g <- g * min(1, clip / ||g||)            when grad_clip_norm > 0
 *   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
 *   p <- p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) - lr * wd * p
 * gradNorm is ||g|| before clipping.
 */
export function adamStep(state: AdamVectors, step: number, adam: AdamParams): AdamVectors & { gradNorm: number } {
  const gradNorm = Math.sqrt(state.grad.reduce((sum, g) => sum + g * g, 0));
  const clip = adam.grad_clip_norm > 0 && gradNorm > adam.grad_clip_norm ? adam.grad_clip_norm / gradNorm : 1;
  const { learning_rate: lr, beta1, beta2, eps, weight_decay: wd } = adam;
  const m = state.m.map((mi, i) => beta1 * mi + (1 - beta1) * state.grad[i] * clip);
  const v = state.v.map((vi, i) => beta2 * vi + (1 - beta2) * (state.grad[i] * clip) ** 2);
  const params = state.params.map((p, i) => {
    const mHat = m[i] / (1 - beta1 ** step);
    const vHat = v[i] / (1 - beta2 ** step);
    return p - lr * (mHat / (Math.sqrt(vHat) + eps)) - lr * wd * p;
  });
  return { params, grad: state.grad, m, v, gradNorm };
}
