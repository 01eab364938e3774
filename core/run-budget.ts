/**
 * A run's budget (`budget` in its config): what its steps have spent, as the
 * budget counts it, and whether that reaches the budget, after which no new
 * step starts.
 *
 * Pure, and below the config and the RL rules (it imports nothing): the run
 * workflow decides with these, so they replay; a change in what they decide is
 * guarded with `patched()` (docs/temporal.md).
 */

/** A run's spend so far, as `budget` counts it. */
export interface RunSpent {
  rollouts: number;
  /** The policy's prompt and completion tokens. */
  tokens: number;
}

/** What steps spent, as `budget` counts it (core/rl/step-summary.ts totalSpend). */
export function spentOf(spend: { rollouts: number; policyTokens: number }): RunSpent {
  return { rollouts: spend.rollouts, tokens: spend.policyTokens };
}

/** What the run has spent once a step that spent `spend` completed (nothing before it when `spent` is absent). */
export function spentAfter(
  spent: RunSpent | undefined,
  spend: { rollouts: number; promptTokens: number; completionTokens: number },
): RunSpent {
  const before = spent ?? { rollouts: 0, tokens: 0 };
  return { rollouts: before.rollouts + spend.rollouts, tokens: before.tokens + spend.promptTokens + spend.completionTokens };
}

/** Whether `spent` reaches `budget` (never without a budget, or without a count). */
export function reachesBudget(spent: RunSpent | undefined, budget: { rollouts?: number; tokens?: number } | null | undefined): boolean {
  if (!budget || !spent) return false;
  return (
    (budget.rollouts !== undefined && spent.rollouts >= budget.rollouts) || (budget.tokens !== undefined && spent.tokens >= budget.tokens)
  );
}
