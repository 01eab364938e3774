/**
 * Trainer/sampler log-prob mismatch: how far the trainer's log-probs of the
 * sampled tokens are from the ones the inference server reported when it
 * sampled them, under the same weights. Real users watch it: a mismatch
 * means the importance ratios of the policy-gradient loss are not ~1 for
 * on-policy data (numerics, a stale adapter, a chat template that differs).
 *
 * Over the model's tokens only (mask 1): meanAbsDiff = mean |lp_train - lp_sample|,
 * and the importance ratio r = exp(lp_train - lp_sample): its mean, standard
 * deviation, min and max.
 */
export interface LogprobMismatch {
  tokens: number;
  meanAbsDiff: number;
  ratioMean: number;
  ratioStd: number;
  ratioMin: number;
  ratioMax: number;
}

export interface MismatchSequence {
  /** Per position: the trainer's log-prob of the target token. */
  trainer: readonly number[];
  /** Per position: the sampler's log-prob of the same token. */
  sampler: readonly number[];
  /** Per position: 1 where the model produced the token. */
  mask: readonly number[];
}

/** null when no position has mask 1. */
export function logprobMismatch(sequences: readonly MismatchSequence[]): LogprobMismatch | null {
  let n = 0;
  let absSum = 0;
  let ratioSum = 0;
  let ratioSquares = 0;
  let ratioMin = Infinity;
  let ratioMax = -Infinity;
  for (const { trainer, sampler, mask } of sequences) {
    const length = Math.min(trainer.length, sampler.length, mask.length);
    for (let t = 0; t < length; t++) {
      if (!mask[t]) continue;
      const diff = trainer[t] - sampler[t];
      const ratio = Math.exp(diff);
      n += 1;
      absSum += Math.abs(diff);
      ratioSum += ratio;
      ratioSquares += ratio * ratio;
      ratioMin = Math.min(ratioMin, ratio);
      ratioMax = Math.max(ratioMax, ratio);
    }
  }
  if (n === 0) return null;
  const ratioMean = ratioSum / n;
  return {
    tokens: n,
    meanAbsDiff: absSum / n,
    ratioMean,
    ratioStd: Math.sqrt(Math.max(0, ratioSquares / n - ratioMean * ratioMean)),
    ratioMin,
    ratioMax,
  };
}
