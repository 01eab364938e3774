/**
 * Step scheduling: one training step as a child workflow, or pipelined steps
 * up to the next barrier (workflows/step-pipeline.ts), and the status moving
 * on with each step's summary.
 *
 * Workflow code: deterministic, no I/O.
 */
import { executeChild, patched, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { stepSpend, type StepSummary } from '../core/rl/step-summary';
import { spentAfter } from '../core/run-budget';
import { afterStep } from '../core/rl/run-health';
import { TASK_QUEUES } from './definitions';
import { trackingActivityOptions } from './activity-options';
import { trainingStep } from './training-step';
import { trainerModelLost } from './failures';
import { restoreLostModel } from './trainer-recovery';
import type { HarnessSRun, Prepared } from './run-state';
import { details } from './run-status';
import { checkHealth } from './run-health';
import { evaluates } from './run-children';
import { untilDone } from './run-outage';

const tracking = proxyActivities<Activities>(trackingActivityOptions());
const RECENT_STEPS = 10;

/**
 * One training step as a child workflow; the status moves on with its
 * summary. Null when the trainer had lost the run's model: the model was
 * restored and the status rewound to the step after the restored one.
 */
export async function runOneStep(run: HarnessSRun, prepared: Prepared): Promise<StepSummary | null> {
  const { status } = run;
  run.stepInFlight = true; // from here a change applies from the next step
  await run.persistConfig();
  details(run, `step ${status.step}/${run.config.steps}, policy ${status.policyVersion}`);
  const restores = status.restores.length;
  status.inFlight = [
    {
      step: status.step,
      phase: 'rollouts',
      policyVersion: status.policyVersion,
      groupsDone: 0,
      groups: run.config.rollout.tasksPerStep,
      rescuesStarted: 0,
      failedGroups: 0,
    },
  ];
  let summary: StepSummary;
  try {
    summary = await untilDone(run, `step ${status.step}`, () =>
      executeChild(trainingStep, {
        // A step re-run after a restore is a new child: the superseded one keeps its history.
        workflowId: `${run.runId}/step-${status.step}${restores > 0 ? `-r${restores}` : ''}`,
        taskQueue: TASK_QUEUES.control,
        staticSummary: `step ${status.step} of Harness-S run ${run.config.name}`,
        args: [
          {
            runId: run.runId,
            step: status.step,
            config: run.config,
            policyVersion: status.policyVersion,
            profileVersion: status.profileVersion!,
            baseHarnessId: prepared.baseHarnessId,
            ...(patched('step-staleness') ? { samplerSteps: status.step } : {}),
          },
        ],
      }),
    );
  } catch (err) {
    const lost = trainerModelLost(err);
    if (lost === null || !patched('trainer-restore')) throw err;
    run.stepInFlight = false;
    status.stepProgress = null;
    status.inFlight = [];
    await restoreLostModel(run.host(), lost, status.step);
    return null;
  } finally {
    status.inFlight = [];
  }
  run.stepInFlight = false;
  stepCompleted(run, summary);
  return summary;
}

/** The status moves on with a step's summary (in step order). */
export function stepCompleted(run: HarnessSRun, summary: StepSummary): void {
  const { status } = run;
  status.stepProgress = null;
  status.lastStep = summary;
  status.recentSteps = [...status.recentSteps, summary].slice(-RECENT_STEPS);
  status.policyVersion = summary.policyVersion;
  status.step += 1;
  run.deadSinceReanchor.push(...summary.deadTaskIds);
  status.spent = spentAfter(status.spent, stepSpend(summary));
  if (run.tracked()) void tracking.trackRun({ runId: run.runId }).catch(() => undefined);
  const { health } = run.config;
  if (health) checkHealth(run, afterStep(run.healthWindow, health, summary.liveDrawnFraction ?? summary.liveGroupFraction), summary.step);
}

/**
 * Pipelined steps up to the next barrier (workflows/step-pipeline.ts): the
 * last completed step's summary, or null when none completed (a pause
 * stopped the pipeline first) or the trainer lost the model (restored).
 */
export async function pipelinedSegment(run: HarnessSRun): Promise<StepSummary | null> {
  const outcome = await run.pipeline.runSegment();
  if (outcome.kind === 'steps') return outcome.last;
  await restoreLostModel(run.host(), outcome.lost, outcome.atStep);
  return null;
}

/** The step at which a pipelined segment stops: the next re-anchoring, evaluation or the run's end. */
export function segmentEnd(run: HarnessSRun): number {
  const { step } = run.status;
  const next = (every: number) => (every > 0 ? (Math.floor(step / every) + 1) * every : Infinity);
  const evaluating = evaluates(run) && run.config.eval.every > 0;
  return Math.min(run.config.steps, next(run.config.router.reanchorEvery), evaluating ? next(run.config.eval.every) : Infinity);
}
