/**
 * Whether the run goes on: its budget (no new step once it is spent) and its
 * health rule (core/rl/run-health.ts), which may pause a run that stalled.
 *
 * Workflow code: deterministic, no I/O.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { assessHealth, type HealthWindow, LEARNING } from '../core/rl/run-health';
import { reachesBudget } from '../core/run-budget';
import { controlActivityOptions } from './activity-options';
import type { HarnessSRun } from './run-state';
import { details } from './run-status';

const control = proxyActivities<Activities>(controlActivityOptions());

/** Whether the run's budget is spent (core/run-budget.ts): no new step starts. */
export function budgetReached(run: HarnessSRun): boolean {
  return reachesBudget(run.status.spent, run.config.budget);
}

/**
 * The health rule over the new window: a change of verdict is shown in the
 * status and the Web UI, reported to the metric, and, with `health.pause`,
 * a newly stalled run pauses with the reason.
 */
export function checkHealth(run: HarnessSRun, window: HealthWindow, step: number): void {
  const rule = run.config.health;
  run.healthWindow = window;
  const previous = run.status.health ?? LEARNING;
  const health = assessHealth(rule, window, previous, step);
  run.status.health = health;
  if (health.state === previous.state) return;
  void control.reportRunHealth({ runId: run.runId, health }).catch(() => undefined);
  if (health.state === 'stalled') {
    details(run, `step ${run.status.step}/${run.config.steps}`);
    // Only while steps remain to hold back: a run at its end finishes, marked.
    const stepsLeft = !run.trainingOver && run.status.step < run.config.steps && !budgetReached(run);
    if (rule.pause && !run.status.paused && stepsLeft) {
      run.pausedForStall = true;
      run.pause(
        `stalled after step ${step}: ${health.reasons.join('; ')}. Change the config or resume to go on: harness-s run resume ${run.runId}`,
      );
    }
  }
}
