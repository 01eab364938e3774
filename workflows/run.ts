/**
 * harnessSRun: one whole Harness-S run. Measures the behaviour profiles, then
 * runs each training step as a child workflow `<runId>/step-<n>`, pausable
 * between steps, continuing as new when the history grows long.
 */
import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  executeChild,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { RunConfig } from '../core/config';
import { applyConfigChange, parseConfigChange } from '../core/config-change';
import type { StepSummary } from '../core/rl/step-summary';
import {
  pauseSignal,
  resumeSignal,
  SEARCH_ATTRIBUTES,
  statusQuery,
  TASK_QUEUES,
  updateConfigUpdate,
  type RunInput,
  type RunStatus,
  type RunSummary,
} from './definitions';
import { controlActivityOptions, publishActivityOptions } from './activity-options';
import { trainingStep } from './training-step';
import { reanchorProfiles } from './reanchor-profiles';
import { evaluatePolicy } from './evaluation';

const control = proxyActivities<Activities>(controlActivityOptions);
const publish = proxyActivities<Activities>(publishActivityOptions);
const RECENT_STEPS = 10;

export async function harnessSRun(input: RunInput): Promise<RunSummary> {
  const runId = workflowInfo().workflowId;
  const status: RunStatus = {
    runId, name: '', env: '', phase: 'preparing', step: input.resume?.nextStep ?? 0, steps: 0,
    policyVersion: input.resume?.policyVersion ?? '', profileVersion: input.resume?.profileVersion ?? null, profileShift: input.resume?.profileShift ?? null,
    paused: false, pauseReason: null, lastStep: null, lastEvaluation: input.resume?.lastEvaluation ?? null, recentSteps: [],
  };
  setHandler(statusQuery, () => status);
  setHandler(pauseSignal, (args) => {
    status.paused = true;
    status.pauseReason = args?.reason ?? 'paused by signal';
  });
  setHandler(resumeSignal, () => {
    status.paused = false;
    status.pauseReason = null;
  });

  // Safe config changes while the run goes on (core/config-change.ts). Applied at once in the
  // workflow, so the loop reads the new config from its next check; stored before the next step's
  // activities start (`persistConfig`), so the step in flight keeps the config it started with.
  let config!: RunConfig; // set once prepareRun has validated it
  let configKnown = false;
  let configDirty = false;
  let stepInFlight = false;
  let trainingOver = false;
  /** The config after `change`, or why not (an ApplicationFailure: the update fails, the run goes on). Before the config is known, the change's shape only. */
  const checkChange = (change: unknown): RunConfig | null => {
    if (trainingOver) throw ApplicationFailure.nonRetryable(`run ${runId} has run all its steps; its config no longer changes`, 'RunConfigError');
    try {
      if (!configKnown) {
        parseConfigChange(change);
        return null;
      }
      return applyConfigChange(config, change, status.step + (stepInFlight ? 1 : 0));
    } catch (err) {
      throw ApplicationFailure.nonRetryable((err as Error).message, 'RunConfigError');
    }
  };
  setHandler(
    updateConfigUpdate,
    async (change) => {
      await condition(() => configKnown); // an update sent while the run prepares waits for its config
      config = checkChange(change)!;
      configDirty = true;
      status.steps = config.steps;
      return { config, fromStep: status.step + (stepInFlight ? 1 : 0) };
    },
    { validator: (change) => void checkChange(change) },
  );
  /** Stores a changed config, so activities from here on read it. */
  const persistConfig = async () => {
    if (!configDirty) return;
    configDirty = false;
    await control.updateRunConfig({ runId, fromStep: status.step, config });
  };

  const prepared = await control.prepareRun({
    runId, config: input.config,
    incarnation: workflowInfo().firstExecutionRunId,
    continuing: input.resume !== undefined || input.recover === true,
  }).catch((err: unknown) => {
    // A config a user must fix: fail the run with its message on top, where the UI and CLIs show it.
    if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.nonRetryable) {
      throw ApplicationFailure.nonRetryable(err.cause.message, err.cause.type ?? 'RunConfigError');
    }
    throw err;
  });
  config = prepared.config;
  configKnown = true;
  status.name = config.name;
  status.env = config.env.kind;
  status.steps = config.steps;
  status.policyVersion ||= config.policy.model;
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.runName, value: config.name },
    { key: SEARCH_ATTRIBUTES.env, value: config.env.kind },
    { key: SEARCH_ATTRIBUTES.step, value: status.step },
  ]);

  if (input.recover && input.resume && input.resume.nextStep > 0) {
    await publish.republishPolicy({ runId, step: input.resume.nextStep - 1 });
  }

  /** Profile version `version`, measured with the current policy: at the start (v1) and at each re-anchoring. */
  const measureProfiles = async (version: number, extraTaskIds: string[]) => {
    setCurrentDetails(`measuring behaviour profiles v${version} of ${prepared.harnessIds.length} harnesses with policy ${status.policyVersion}`);
    const profiles = await executeChild(reanchorProfiles, {
      workflowId: `${runId}/profiles-v${version}`,
      taskQueue: TASK_QUEUES.control,
      args: [{ runId, config, version, policyVersion: status.policyVersion, harnessIds: prepared.harnessIds, extraTaskIds }],
    });
    status.profileVersion = profiles.version;
    status.profileShift = profiles.shift;
  };

  /**
   * Whether this run evaluates. Executions started before evaluatePolicy
   * existed replay without it (no patch marker), and their config, from
   * prepareRun's recorded result, has no `eval` section.
   */
  const evaluations = () => patched('evaluate-policy') && (config.eval?.enabled ?? false);

  /** evaluatePolicy after `afterSteps` steps, with the current policy and profiles. */
  const evaluate = async (afterSteps: number) => {
    const phase = status.phase;
    status.phase = 'evaluating';
    setCurrentDetails(`evaluating ${status.policyVersion} after ${afterSteps} steps: base harness and Rank-1`);
    status.lastEvaluation = await executeChild(evaluatePolicy, {
      workflowId: `${runId}/eval-${afterSteps}`,
      taskQueue: TASK_QUEUES.control,
      args: [{ runId, config, afterSteps, policyVersion: status.policyVersion, profileVersion: status.profileVersion!, baseHarnessId: prepared.baseHarnessId }],
    });
    status.phase = phase;
  };

  if (status.profileVersion === null) {
    status.phase = 'profiling';
    await measureProfiles(1, []);
  }

  status.phase = 'training';
  const deadSinceReanchor: string[] = [...(input.resume?.deadSinceReanchor ?? [])];
  while (status.step < config.steps) {
    if (status.paused) {
      setCurrentDetails(`paused before step ${status.step}: ${status.pauseReason}`);
      await condition(() => !status.paused);
      if (status.step >= config.steps) break; // a change while paused may have ended the run here
    }
    stepInFlight = true; // from here a change applies from the next step
    await persistConfig();
    setCurrentDetails(`step ${status.step}/${config.steps}, policy ${status.policyVersion}`);
    const summary: StepSummary = await executeChild(trainingStep, {
      workflowId: `${runId}/step-${status.step}`,
      taskQueue: TASK_QUEUES.control,
      args: [{
        runId, step: status.step, config, policyVersion: status.policyVersion,
        profileVersion: status.profileVersion!, baseHarnessId: prepared.baseHarnessId,
      }],
    });
    stepInFlight = false;
    status.lastStep = summary;
    status.recentSteps = [...status.recentSteps, summary].slice(-RECENT_STEPS);
    status.policyVersion = summary.policyVersion;
    status.step += 1;
    deadSinceReanchor.push(...summary.deadTaskIds);
    const { reanchorEvery } = config.router;
    if (reanchorEvery > 0 && status.step % reanchorEvery === 0 && status.step < config.steps) {
      // Policy-aware re-anchoring: a harness's usefulness moves as the policy learns.
      await persistConfig();
      await measureProfiles(status.profileVersion! + 1, [...new Set(deadSinceReanchor)]);
      deadSinceReanchor.length = 0;
    }
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.step, value: status.step },
      { key: SEARCH_ATTRIBUTES.baseSuccess, value: summary.baseSuccessRate },
    ]);
    if (evaluations() && config.eval.every > 0 && status.step % config.eval.every === 0 && status.step < config.steps) {
      await persistConfig();
      await evaluate(status.step);
    }
    if (status.step < config.steps && workflowInfo().continueAsNewSuggested) {
      await condition(() => !status.paused && allHandlersFinished());
      await persistConfig();
      await continueAsNew<typeof harnessSRun>({
        config,
        resume: {
          nextStep: status.step, policyVersion: status.policyVersion, profileVersion: status.profileVersion!,
          deadSinceReanchor: [...new Set(deadSinceReanchor)], profileShift: status.profileShift, lastEvaluation: status.lastEvaluation,
        },
        recover: input.recover,
      });
    }
  }

  trainingOver = true;
  await persistConfig();
  if (evaluations()) await evaluate(config.steps);
  status.phase = 'summarizing';
  const result = await control.summarizeRun({ runId });
  await condition(allHandlersFinished);
  status.phase = 'done';
  setCurrentDetails(`done: ${result.stepsCompleted} steps, policy ${result.policyVersion}`);
  return result;
}
