/**
 * GRPO advantages, as verl's `compute_grpo_outcome_advantage` computes them.
 *
 * For one group of rewards r_1..r_n:
 *   A_i = (r_i - mean(r)) / (std(r) + eps)     (normalizeByStd, the default)
 *   A_i =  r_i - mean(r)                       (Dr.GRPO: no std)
 * with the unbiased std (divisor n - 1), eps = 1e-6.
 * Edge cases: a group whose rewards are all equal has zero advantage (it carries
 * no learning signal: the "dead group" Harness-S rescues, core/rl/rescue.ts). A group of one is
 * not a group: verl then takes mean = 0 and std = 1, so the advantage is the raw
 * reward (r / (1 + eps)), plain REINFORCE without a baseline. We keep verl's
 * behaviour so results compare; RunConfig refuses groupSize 1 for that reason.
 */
export const GRPO_EPSILON = 1e-6;

export function computeGrpoAdvantages(rewards: readonly number[], normalizeByStd = true): number[] {
  const n = rewards.length;
  if (n === 0) return [];
  if (n === 1) return [normalizeByStd ? rewards[0] / (1 + GRPO_EPSILON) : rewards[0]];
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  const centred = rewards.map((r) => r - mean);
  if (centred.every((c) => c === 0)) return centred.map(() => 0);
  if (!normalizeByStd) return centred;
  const std = Math.sqrt(centred.reduce((a, c) => a + c * c, 0) / (n - 1));
  return centred.map((c) => c / (std + GRPO_EPSILON));
}
