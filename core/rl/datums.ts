/**
 * Tinker Datums from token-faithful trajectories.
 *
 * For a sequence tokens = prompt ++ response: model_input = tokens[:-1],
 * target_tokens = tokens[1:], and the sampling logprobs and per-token
 * advantages aligned to the targets, 0 on prompt and observation tokens.
 * Tinker's losses are sums, so advantages are divided by the batch's count of
 * response (model) tokens: the update is then a per-token mean, as in verl.
 */
import type { TokenSample } from '../policy/trajectory';

export interface TensorData {
  data: number[];
  dtype: 'int64' | 'float32';
  shape: number[];
}

export interface Datum {
  model_input: { chunks: Array<{ type: 'encoded_text'; tokens: number[] }> };
  loss_fn_inputs: { target_tokens: TensorData; logprobs: TensorData; advantages: TensorData };
}

const tensor = (data: number[], dtype: TensorData['dtype']): TensorData => ({ data, dtype, shape: [data.length] });

export function countResponseTokens(samples: readonly TokenSample[]): number {
  return samples.reduce((n, s) => n + s.responseMask.reduce((a, m) => a + m, 0), 0);
}

export function buildDatum(sample: TokenSample, advantage: number, normaliser: number): Datum {
  const tokens = [...sample.promptIds, ...sample.responseIds];
  const promptZeros = sample.promptIds.map(() => 0);
  // Per token of `tokens`; shifted by one below to align with the targets.
  const logprobs = [...promptZeros, ...sample.responseLogprobs.map((lp, i) => (sample.responseMask[i] ? lp : 0))];
  const advantages = [...promptZeros, ...sample.responseMask.map((m) => (m ? advantage / normaliser : 0))];
  return {
    model_input: { chunks: [{ type: 'encoded_text', tokens: tokens.slice(0, -1) }] },
    loss_fn_inputs: {
      target_tokens: tensor(tokens.slice(1), 'int64'),
      logprobs: tensor(logprobs.slice(1), 'float32'),
      advantages: tensor(advantages.slice(1), 'float32'),
    },
  };
}

/** Per target position of the sample's Datum: 1 where the model produced the target token (aligned with target_tokens). */
export function datumTargetMask(sample: TokenSample): number[] {
  return [...sample.promptIds.map(() => 0), ...sample.responseMask].slice(1);
}
