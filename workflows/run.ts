/**
 * harnessSRun: one whole Harness-S run. Measures the behaviour profiles, then
 * runs each training step as a child workflow `<runId>/step-<n>`, pausable
 * between steps, re-anchoring the profiles and evaluating on its schedule,
 * continuing as new when the history grows long.
 *
 * The run is a small state object (`HarnessSRun`, workflows/run-state.ts):
 * its status (what the status query shows), its config (changed by the
 * updateConfig update), and the flags that say where the loop is. Signal,
 * query and update handlers are its methods; `execute` (here) is the loop.
 *
 * Determinism: this code and the pure core functions it calls (through the
 * child workflows: core/rl/rescue.ts, core/rl/step-summary.ts,
 * core/config-change.ts) are replayed; a change in what they decide is
 * guarded with `patched()` (docs/temporal.md).
 */
import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { FAILURE_TYPES } from '../core/failure-types';
import { runInputProblem } from '../core/run-input';
import { LEARNING } from '../core/rl/run-health';
import {
  pauseSignal,
  resumeSignal,
  stepProgressSignal,
  SEARCH_ATTRIBUTES,
  statusQuery,
  updateConfigUpdate,
  type RunInput,
  type RunSummary,
} from './definitions';
import { controlActivityOptions, trackingActivityOptions } from './activity-options';
import { loadForkedModel } from './trainer-recovery';
import { HarnessSRun, type Prepared } from './run-state';
import { details } from './run-status';
import { pipelinedSegment, runOneStep } from './run-steps';
import { budgetReached } from './run-health';
import { evaluate, evaluates, measureProfiles } from './run-children';
import { republish, untilDone } from './run-outage';
import { upgradePrepared } from './upgrade';

const control = proxyActivities<Activities>(controlActivityOptions());
const tracking = proxyActivities<Activities>(trackingActivityOptions());

export async function harnessSRun(input: RunInput): Promise<RunSummary> {
  // Runs started from the Web UI or the temporal CLI skip the CLI's checks; a mistyped input fails at once, saying what is wrong.
  const inputProblem = patched('strict-run-input') ? runInputProblem(input) : null;
  if (inputProblem) throw ApplicationFailure.nonRetryable(`workflow input is invalid: ${inputProblem}`, FAILURE_TYPES.RunConfigError);
  const run = new HarnessSRun(input);
  setHandler(statusQuery, () => run.status);
  setHandler(pauseSignal, (args) => run.pause(args?.reason));
  setHandler(resumeSignal, () => run.resume());
  setHandler(stepProgressSignal, (progress) => run.stepProgressed(progress));
  setHandler(updateConfigUpdate, (change) => run.updateConfig(change), { validator: (change) => void run.checkChange(change) });
  try {
    return await execute(run);
  } catch (err) {
    await run.trackFailure(err);
    throw err;
  }
}

async function execute(run: HarnessSRun): Promise<RunSummary> {
  const { status } = run;
  const prepared = await prepare(run);
  if (run.input.fork) {
    await loadForkedModel(run.host(), run.input.fork);
  } else if (run.input.recover && run.input.resume && run.input.resume.nextStep > 0) {
    await republish(run, run.input.resume.nextStep - 1);
  }
  if (run.config.budget && run.input.resume && run.input.resume.nextStep > 0 && run.input.resume.spent === undefined) {
    // A recovered or forked run: its budget counts the steps before it too.
    status.spent = await control.runSpent({ runId: run.runId, beforeStep: run.input.resume.nextStep });
  }
  if (status.profileVersion === null) {
    status.phase = 'profiling';
    await measureProfiles(run, prepared, 1, []);
  }

  status.phase = 'training';
  while (status.step < run.config.steps && !budgetReached(run)) {
    if (status.paused) {
      details(run, `paused before step ${status.step}: ${status.pauseReason}`);
      await condition(() => !status.paused);
      if (status.step >= run.config.steps) break; // a change while paused may have ended the run here
      // Replicas may have restarted while the run was paused: the current version goes where it is missing.
      if (patched('republish-on-resume')) await untilDone(run, 'republishing after the resume', () => republish(run, status.step - 1));
    }
    const summary = run.pipelined() ? await pipelinedSegment(run) : await runOneStep(run, prepared);
    if (summary === null) {
      // The trainer lost the model (restored: the loop goes on from the restored step), or a pause or a due
      // continue-as-new stopped the pipeline before a step completed.
      if (!status.paused && status.step < run.config.steps && workflowInfo().continueAsNewSuggested) await continueRunAsNew(run);
      continue;
    }
    const { reanchorEvery } = run.config.router;
    const goesOn = status.step < run.config.steps && !budgetReached(run);
    if (reanchorEvery > 0 && status.step % reanchorEvery === 0 && goesOn) {
      // Policy-aware re-anchoring: a harness's usefulness moves as the policy learns.
      await run.persistConfig();
      await measureProfiles(run, prepared, status.profileVersion! + 1, [...new Set(run.deadSinceReanchor)]);
      run.deadSinceReanchor.length = 0;
    }
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.step, value: status.step },
      { key: SEARCH_ATTRIBUTES.baseSuccess, value: summary.baseSuccessRate },
    ]);
    if (evaluates(run) && run.config.eval.every > 0 && status.step % run.config.eval.every === 0 && goesOn) {
      await run.persistConfig();
      await evaluate(run, prepared, status.step);
    }
    if (status.step < run.config.steps && workflowInfo().continueAsNewSuggested) await continueRunAsNew(run);
  }

  run.trainingOver = true;
  await run.persistConfig();
  // A run its budget stopped evaluates after the steps it ran (before budgets: always after `steps`).
  if (evaluates(run)) await evaluate(run, prepared, Math.min(status.step, run.config.steps));
  status.phase = 'summarizing';
  const result = await control.summarizeRun({ runId: run.runId });
  // The tracker's run gets the report and ends; a tracker that is down does not hold the run (trackRun catches).
  if (run.tracked()) await tracking.trackRun({ runId: run.runId, final: 'FINISHED' }).catch(() => undefined);
  await condition(allHandlersFinished);
  status.phase = 'done';
  details(run, `done: ${result.stepsCompleted} steps, policy ${result.policyVersion}`);
  return result;
}

/** Validates the config and registers the run; a config a user must fix fails the run with its message on top. */
async function prepare(run: HarnessSRun): Promise<Prepared> {
  const recorded = await control
    .prepareRun({
      runId: run.runId,
      config: run.input.config,
      incarnation: workflowInfo().firstExecutionRunId,
      continuing: run.input.resume !== undefined || run.input.recover === true,
      ...(run.input.fork ? { fork: { ...run.input.fork, profileVersion: run.input.resume?.profileVersion ?? null } } : {}),
    })
    .catch((err: unknown) => {
      // Where the UI and CLIs show it.
      if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.nonRetryable) {
        throw ApplicationFailure.nonRetryable(err.cause.message, err.cause.type ?? FAILURE_TYPES.RunConfigError);
      }
      throw err;
    });
  const prepared = upgradePrepared(recorded);
  run.config = prepared.config;
  run.configKnown = true;
  run.prepared = prepared;
  const { status } = run;
  status.name = run.config.name;
  status.env = run.config.env.kind;
  status.steps = run.config.steps;
  status.policyVersion ||= run.config.policy.model;
  // Configs recorded before budgets and the health rule have neither.
  status.budget = run.config.budget ?? null;
  if (run.config.health) status.health ??= LEARNING;
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.runName, value: run.config.name },
    { key: SEARCH_ATTRIBUTES.env, value: run.config.env.kind },
    { key: SEARCH_ATTRIBUTES.step, value: status.step },
    ...(status.parent ? [{ key: SEARCH_ATTRIBUTES.parentRun, value: status.parent.runId }] : []),
  ]);
  return prepared;
}

/**
 * Continues as new from the next step, once not paused and no handler is
 * running; a changed config is stored first, and a pause that comes
 * meanwhile is carried over. A recovered run's republish is done: the next
 * execution is a plain continuation.
 */
async function continueRunAsNew(run: HarnessSRun): Promise<never> {
  const { status } = run;
  await condition(() => !status.paused && allHandlersFinished());
  await run.persistConfig();
  return continueAsNew<typeof harnessSRun>({
    config: run.config,
    resume: {
      nextStep: status.step,
      policyVersion: status.policyVersion,
      profileVersion: status.profileVersion!,
      deadSinceReanchor: [...new Set(run.deadSinceReanchor)],
      profileShift: status.profileShift,
      lastEvaluation: status.lastEvaluation,
      ...(status.paused ? { pauseReason: status.pauseReason ?? '' } : {}),
      ...(status.restores.length > 0 ? { restores: status.restores } : {}),
      ...(status.parent ? { parent: status.parent } : {}),
      ...(status.spent ? { spent: status.spent } : {}),
      ...(status.health ? { health: { window: run.healthWindow, health: status.health } } : {}),
    },
  });
}
