/**
 * The publish probe: after a step's weights are loaded on an inference
 * server, the server's log-probs of a fixed token sequence must match the
 * trainer's under the same weights, so a stale adapter is never served
 * silently. The trainer's side is a forward pass at train time; the server's
 * is vLLM's `prompt_logprobs` of the same sequence.
 */
import type { TokenSample } from './trajectory';

export interface AdapterProbe {
  /** The probe sequence. */
  tokens: number[];
  /** Indices i (>= 1) of tokens whose log-prob given tokens[0..i) is compared: the model's own tokens. */
  positions: number[];
  /** The trainer's log-prob of tokens[i] at each position (filled by the forward pass). */
  logprobs: number[];
}

/** Long enough to exercise the adapter, short enough for any server's context. */
export const PROBE_MAX_TOKENS = 512;

/** The probe sequence of a step: a trajectory's prompt and response, cut at PROBE_MAX_TOKENS, compared on the model's tokens. */
export function probeSequence(sample: TokenSample): Omit<AdapterProbe, 'logprobs'> {
  const tokens = [...sample.promptIds, ...sample.responseIds].slice(0, PROBE_MAX_TOKENS);
  const positions: number[] = [];
  sample.responseMask.forEach((m, j) => {
    const i = sample.promptIds.length + j;
    if (m && i >= 1 && i < tokens.length) positions.push(i);
  });
  return { tokens, positions };
}

/** Mean |served - trainer| over the probe's positions. */
export function probeMeanAbsDiff(probe: AdapterProbe, served: ReadonlyArray<number | null>): number {
  if (probe.positions.length === 0) return 0;
  let sum = 0;
  probe.positions.forEach((i, k) => {
    const lp = served[i];
    sum += lp === null || lp === undefined ? Infinity : Math.abs(lp - probe.logprobs[k]);
  });
  return sum / probe.positions.length;
}
