/**
 * The run's child workflows between steps: the behaviour profiles measured
 * (at the start and at each re-anchoring) and the policy evaluated.
 *
 * Workflow code: deterministic, no I/O.
 */
import { executeChild, patched, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { afterEvaluation } from '../core/rl/run-health';
import { TASK_QUEUES } from './definitions';
import { trackingActivityOptions } from './activity-options';
import { reanchorProfiles } from './reanchor-profiles';
import { evaluatePolicy } from './evaluation';
import type { HarnessSRun, Prepared } from './run-state';
import { details } from './run-status';
import { checkHealth } from './run-health';
import { untilDone } from './run-outage';

const tracking = proxyActivities<Activities>(trackingActivityOptions());

/** Profile version `version`, measured with the current policy: at the start (v1) and at each re-anchoring. */
export async function measureProfiles(run: HarnessSRun, prepared: Prepared, version: number, extraTaskIds: string[]): Promise<void> {
  const { status } = run;
  details(run, `measuring behaviour profiles v${version} of ${prepared.harnessIds.length} harnesses with policy ${status.policyVersion}`);
  const profiles = await untilDone(run, `profiles v${version}`, () =>
    executeChild(reanchorProfiles, {
      workflowId: `${run.runId}/profiles-v${version}`,
      taskQueue: TASK_QUEUES.control,
      staticSummary: `behaviour profiles v${version} of Harness-S run ${run.config.name}`,
      args: [
        {
          runId: run.runId,
          config: run.config,
          version,
          policyVersion: status.policyVersion,
          harnessIds: prepared.harnessIds,
          extraTaskIds,
        },
      ],
    }),
  );
  status.profileVersion = profiles.version;
  status.profileShift = profiles.shift;
}

/**
 * Whether this run evaluates. Executions started before evaluatePolicy
 * existed replay without it (no patch marker), and their config, from
 * prepareRun's recorded result, has no `eval` section (the same rule as
 * core/config.ts keepPreEvaluationShape).
 */
export function evaluates(run: HarnessSRun): boolean {
  return patched('evaluate-policy') && (run.config.eval?.enabled ?? false);
}

/** evaluatePolicy after `afterSteps` steps, with the current policy and profiles. */
export async function evaluate(run: HarnessSRun, prepared: Prepared, afterSteps: number): Promise<void> {
  const { status } = run;
  const phase = status.phase;
  status.phase = 'evaluating';
  details(run, `evaluating ${status.policyVersion} after ${afterSteps} steps: base harness and Rank-1`);
  status.lastEvaluation = await untilDone(run, `evaluation after ${afterSteps} steps`, () =>
    executeChild(evaluatePolicy, {
      workflowId: `${run.runId}/eval-${afterSteps}${status.restores.length > 0 ? `-r${status.restores.length}` : ''}`,
      taskQueue: TASK_QUEUES.control,
      staticSummary: `evaluation after ${afterSteps} steps of Harness-S run ${run.config.name}`,
      args: [
        {
          runId: run.runId,
          config: run.config,
          afterSteps,
          policyVersion: status.policyVersion,
          profileVersion: status.profileVersion!,
          baseHarnessId: prepared.baseHarnessId,
        },
      ],
    }),
  );
  status.phase = phase;
  if (run.tracked()) void tracking.trackRun({ runId: run.runId }).catch(() => undefined);
  const { health } = run.config;
  if (health) checkHealth(run, afterEvaluation(run.healthWindow, health, status.lastEvaluation.base.successRate), afterSteps - 1);
}
