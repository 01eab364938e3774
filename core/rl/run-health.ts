/**
 * Whether a run is still learning (`health` in the run config): a run whose
 * groups carry no signal for several steps, or whose base success on the eval
 * split has not risen over its last evaluations, is stalled. The run workflow
 * keeps the window and calls `assessHealth` after each step and evaluation.
 *
 * Pure and deterministic: workflow code calls it.
 */
import type { HealthConfig } from '../config';

export interface RunHealth {
  state: 'learning' | 'stalled';
  /** Why it is stalled, one line per rule that tripped; empty while learning. */
  reasons: string[];
  /** The step after which it was found stalled; null while learning. */
  sinceStep: number | null;
}

/** What the rules look at: the last steps' live-group shares and the base success of the evaluations, oldest first. */
export interface HealthWindow {
  liveShares: number[];
  evalSuccess: number[];
}

export const LEARNING: RunHealth = { state: 'learning', reasons: [], sinceStep: null };

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** The window after a step with live-group share `liveShare` (only the last `rule.steps` are kept). */
export function afterStep(window: HealthWindow, rule: HealthConfig, liveShare: number): HealthWindow {
  return { ...window, liveShares: [...window.liveShares, liveShare].slice(-rule.steps) };
}

/** The window after an evaluation with base success `success` (only the last `rule.evaluations` + 1 are kept). */
export function afterEvaluation(window: HealthWindow, rule: HealthConfig, success: number): HealthWindow {
  return { ...window, evalSuccess: [...window.evalSuccess, success].slice(-(rule.evaluations + 1)) };
}

/** The reasons the run is stalled by `rule` over `window`; empty when it is learning. */
export function stalledReasons(rule: HealthConfig, window: HealthWindow): string[] {
  const reasons: string[] = [];
  const live = window.liveShares.slice(-rule.steps);
  if (rule.minLiveShare > 0 && live.length >= rule.steps && live.every((share) => share < rule.minLiveShare)) {
    reasons.push(
      `fewer than ${pct(rule.minLiveShare)} of groups had a learning signal in each of the last ${rule.steps} steps (${live.map(pct).join(', ')})`,
    );
  }
  const evals = window.evalSuccess.slice(-(rule.evaluations + 1));
  if (rule.evaluations > 0 && evals.length === rule.evaluations + 1) {
    const gain = evals[evals.length - 1] - evals[0];
    if (gain <= rule.minGain) {
      reasons.push(
        `base success on the eval split moved ${gain >= 0 ? '+' : ''}${(gain * 100).toFixed(1)} points over the last ${rule.evaluations} evaluations (${evals.map(pct).join(' → ')}), not more than ${(rule.minGain * 100).toFixed(1)}`,
      );
    }
  }
  return reasons;
}

/** The run's health after `step` from the previous one: a run stays stalled since the step it first tripped at. */
export function assessHealth(rule: HealthConfig, window: HealthWindow, previous: RunHealth, step: number): RunHealth {
  const reasons = stalledReasons(rule, window);
  if (reasons.length === 0) return LEARNING;
  return { state: 'stalled', reasons, sinceStep: previous.state === 'stalled' ? previous.sinceStep : step };
}
