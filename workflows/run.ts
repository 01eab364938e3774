/**
 * harnessSRun: one whole Harness-S run. Measures the behaviour profiles, then
 * runs each training step as a child workflow `<runId>/step-<n>`, pausable
 * between steps, re-anchoring the profiles and evaluating on its schedule,
 * continuing as new when the history grows long.
 *
 * The run is a small state object (`HarnessSRun`): its status (what the
 * status query shows), its config (changed by the updateConfig update), and
 * the flags that say where the loop is. Signal, query and update handlers are
 * its methods; `execute` is the loop.
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
  ContinueAsNew,
  continueAsNew,
  executeChild,
  isCancellation,
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
import { FAILURE_TYPES } from '../core/failure-types';
import { runInputProblem } from '../core/run-input';
import { stepSpend, type StepSummary } from '../core/rl/step-summary';
import { afterEvaluation, afterStep, assessHealth, type HealthWindow, LEARNING } from '../core/rl/run-health';
import {
  pauseSignal,
  resumeSignal,
  stepProgressSignal,
  type StepProgress,
  type InFlightStep,
  type StepPhase,
  SEARCH_ATTRIBUTES,
  statusQuery,
  TASK_QUEUES,
  updateConfigUpdate,
  type RunInput,
  type RunStatus,
  type RunSummary,
} from './definitions';
import { controlActivityOptions, trackingActivityOptions } from './activity-options';
import { trainingStep } from './training-step';
import { reanchorProfiles } from './reanchor-profiles';
import { evaluatePolicy } from './evaluation';
import { outageOf, runFailure, trainerModelLost } from './failures';
import { StepPipeline } from './step-pipeline';
import { loadForkedModel, type RecoveryHost, restoreLostModel } from './trainer-recovery';
import { isSimulatedEnv } from '../core/envs/sim/config';
import { trackersOf } from '../core/tracking/tracker-configs';
import { republishPolicyVersion } from './publish';
import { replicaLines, withPublish, withWorkerViews } from './replica-status';

const control = proxyActivities<Activities>(controlActivityOptions());
const tracking = proxyActivities<Activities>(trackingActivityOptions());
const RECENT_STEPS = 10;
const STEP_PHASES: readonly StepPhase[] = ['rollouts', 'waiting-for-trainer', 'training', 'waiting-to-publish', 'publishing'];

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
    return await run.execute();
  } catch (err) {
    await run.trackFailure(err);
    throw err;
  }
}

interface Prepared {
  baseHarnessId: string;
  harnessIds: string[];
  /** Absent from prepareRun results recorded before the viewer existed. */
  viewerRunUrl?: string | null;
}

class HarnessSRun {
  readonly runId = workflowInfo().workflowId;
  readonly status: RunStatus;
  /** Set once prepareRun has validated it; changed by updateConfig. */
  private config!: RunConfig;
  private configKnown = false;
  /** A changed config not yet stored: activities read the stored one, so it is stored before the next ones start. */
  private configDirty = false;
  /** A step is running: a change applies from the next step. */
  private stepInFlight = false;
  private trainingOver = false;
  private readonly deadSinceReanchor: string[];
  private prepared: Prepared | null = null;
  private readonly pipeline: StepPipeline;
  /** What the health rule looks at (core/rl/run-health.ts). */
  private healthWindow: HealthWindow;
  /** The run paused itself because it stalled: a resume starts the rule's window over. */
  private pausedForStall = false;

  constructor(private readonly input: RunInput) {
    this.status = {
      runId: this.runId, name: '', env: '', phase: 'preparing', step: input.resume?.nextStep ?? 0, steps: 0,
      policyVersion: input.resume?.policyVersion ?? '', profileVersion: input.resume?.profileVersion ?? null, profileShift: input.resume?.profileShift ?? null,
      paused: false, pauseReason: null, stepProgress: null, lastStep: null, lastEvaluation: input.resume?.lastEvaluation ?? null, recentSteps: [],
      restores: [...(input.resume?.restores ?? [])], parent: input.fork ?? input.resume?.parent ?? null,
      spent: input.resume?.spent ?? { rollouts: 0, tokens: 0 },
      ...(input.resume?.health ? { health: input.resume.health.health } : {}),
    };
    this.healthWindow = input.resume?.health?.window ?? { liveShares: [], evalSuccess: [] };
    this.deadSinceReanchor = [...(input.resume?.deadSinceReanchor ?? [])];
    this.pipeline = new StepPipeline({
      runId: this.runId,
      status: this.status,
      config: () => this.config,
      baseHarnessId: () => this.prepared!.baseHarnessId,
      holds: () => this.status.paused || workflowInfo().continueAsNewSuggested || this.budgetReached(),
      segmentEnd: () => this.segmentEnd(),
      persistConfig: (fromStep) => this.persistConfig(fromStep),
      untilDone: (what, child) => this.untilDone(what, child),
      completed: (summary) => {
        this.stepCompleted(summary);
        upsertSearchAttributes([
          { key: SEARCH_ATTRIBUTES.step, value: this.status.step },
          { key: SEARCH_ATTRIBUTES.baseSuccess, value: summary.baseSuccessRate },
        ]);
      },
      details: (now) => this.details(`step ${this.status.step}/${this.config.steps}, pipelined (k = ${this.config.pipeline?.maxStaleness ?? 0}): ${now}`),
    });
    if (input.resume?.pauseReason !== undefined && input.resume.pauseReason !== null) this.pause(input.resume.pauseReason);
  }

  // ------------------------------------------------------------ handlers

  pause(reason: string | undefined): void {
    this.status.paused = true;
    this.status.pauseReason = reason ?? 'paused by signal';
    this.pipeline?.poke(); // steps in flight finish; no new one starts
  }

  resume(): void {
    this.status.paused = false;
    this.status.pauseReason = null;
    if (this.pausedForStall) {
      // The user saw why and chose to go on: the rule starts over.
      this.pausedForStall = false;
      this.healthWindow = { liveShares: [], evalSuccess: this.healthWindow.evalSuccess.slice(-1) };
      this.status.health = LEARNING;
      void control.reportRunHealth({ runId: this.runId, health: LEARNING }).catch(() => undefined);
    }
    this.pipeline.poke();
  }

  /** A running step's progress, shown on the run's own page (a late signal from a step no longer running is ignored). */
  stepProgressed(progress: StepProgress): void {
    this.pipeline.progressed(progress);
    const { replicaViews, published, ...stepProgress } = progress;
    if (replicaViews) this.status.replicas = withWorkerViews(this.status.replicas ?? [], replicaViews);
    if (published) this.status.replicas = withPublish(this.status.replicas ?? [], published);
    progress = stepProgress;
    const shown = this.status.inFlight?.find((s) => s.step === progress.step);
    if (!shown || this.status.phase !== 'training') return;
    // Two signals a step sends in one workflow task may arrive in either order: a phase never goes back.
    const later = progress.phase !== undefined && STEP_PHASES.indexOf(progress.phase) >= STEP_PHASES.indexOf(shown.phase);
    Object.assign(shown, progress, { phase: later ? progress.phase : shown.phase });
    if (progress.step === this.status.step) this.status.stepProgress = progress;
    const inFlight = this.status.inFlight ?? [];
    if (this.pipelined() || inFlight.length > 1) {
      this.details(`step ${this.status.step}/${this.config.steps}: ${inFlightLine(inFlight)}`);
      return;
    }
    const failed = progress.failedGroups ? `, ${progress.failedGroups} failed` : '';
    const phase = shown.phase === 'rollouts' ? '' : ` (${shown.phase.replace(/-/g, ' ')})`;
    this.details(`step ${progress.step}/${this.config.steps}, policy ${this.status.policyVersion}: ${progress.groupsDone}/${progress.groups} base groups done, ${progress.rescuesStarted} rescues started${failed}${phase}`);
  }

  /**
   * Safe config changes while the run goes on (core/config-change.ts): the
   * config after `change`, or why not (an ApplicationFailure: the update
   * fails, the run goes on). Before the config is known, the change's shape only.
   */
  checkChange(change: unknown): RunConfig | null {
    if (this.trainingOver) throw ApplicationFailure.nonRetryable(`run ${this.runId} has run all its steps; its config no longer changes`, FAILURE_TYPES.RunConfigError);
    try {
      if (!this.configKnown) {
        parseConfigChange(change);
        return null;
      }
      return applyConfigChange(this.config, change, this.nextChangeStep());
    } catch (err) {
      throw ApplicationFailure.nonRetryable((err as Error).message, FAILURE_TYPES.RunConfigError);
    }
  }

  /**
   * Applied at once in the workflow, so the loop reads the new config from its
   * next check; stored before the next step's activities start
   * (`persistConfig`), so the step in flight keeps the config it started with.
   */
  async updateConfig(change: unknown): Promise<{ config: RunConfig; fromStep: number }> {
    await condition(() => this.configKnown); // an update sent while the run prepares waits for its config
    this.config = this.checkChange(change)!;
    this.configDirty = true;
    this.status.steps = this.config.steps;
    if (this.config.budget || this.status.budget) this.status.budget = this.config.budget ?? null;
    this.pipeline.poke();
    return { config: this.config, fromStep: this.nextChangeStep() };
  }

  // ----------------------------------------------------------------- run

  async execute(): Promise<RunSummary> {
    const { status } = this;
    const prepared = await this.prepare();
    if (this.input.fork) {
      await loadForkedModel(this.host(), this.input.fork);
    } else if (this.input.recover && this.input.resume && this.input.resume.nextStep > 0) {
      await this.republish(this.input.resume.nextStep - 1);
    }
    if (this.config.budget && this.input.resume && this.input.resume.nextStep > 0 && this.input.resume.spent === undefined) {
      // A recovered or forked run: its budget counts the steps before it too.
      status.spent = await control.runSpent({ runId: this.runId, beforeStep: this.input.resume.nextStep });
    }
    if (status.profileVersion === null) {
      status.phase = 'profiling';
      await this.measureProfiles(prepared, 1, []);
    }

    status.phase = 'training';
    while (status.step < this.config.steps && !this.budgetReached()) {
      if (status.paused) {
        this.details(`paused before step ${status.step}: ${status.pauseReason}`);
        await condition(() => !status.paused);
        if (status.step >= this.config.steps) break; // a change while paused may have ended the run here
        // Replicas may have restarted while the run was paused: the current version goes where it is missing.
        if (patched('republish-on-resume')) await this.untilDone('republishing after the resume', () => this.republish(status.step - 1));
      }
      const summary = this.pipelined() ? await this.pipelinedSegment() : await this.runOneStep(prepared);
      if (summary === null) {
        // The trainer lost the model (restored: the loop goes on from the restored step), or a pause or a due
        // continue-as-new stopped the pipeline before a step completed.
        if (!status.paused && status.step < this.config.steps && workflowInfo().continueAsNewSuggested) await this.continueAsNew();
        continue;
      }
      const { reanchorEvery } = this.config.router;
      const goesOn = status.step < this.config.steps && !this.budgetReached();
      if (reanchorEvery > 0 && status.step % reanchorEvery === 0 && goesOn) {
        // Policy-aware re-anchoring: a harness's usefulness moves as the policy learns.
        await this.persistConfig();
        await this.measureProfiles(prepared, status.profileVersion! + 1, [...new Set(this.deadSinceReanchor)]);
        this.deadSinceReanchor.length = 0;
      }
      upsertSearchAttributes([
        { key: SEARCH_ATTRIBUTES.step, value: status.step },
        { key: SEARCH_ATTRIBUTES.baseSuccess, value: summary.baseSuccessRate },
      ]);
      if (this.evaluates() && this.config.eval.every > 0 && status.step % this.config.eval.every === 0 && goesOn) {
        await this.persistConfig();
        await this.evaluate(prepared, status.step);
      }
      if (status.step < this.config.steps && workflowInfo().continueAsNewSuggested) await this.continueAsNew();
    }

    this.trainingOver = true;
    await this.persistConfig();
    // A run its budget stopped evaluates after the steps it ran (before budgets: always after `steps`).
    if (this.evaluates()) await this.evaluate(prepared, Math.min(status.step, this.config.steps));
    status.phase = 'summarizing';
    const result = await control.summarizeRun({ runId: this.runId });
    // The tracker's run gets the report and ends; a tracker that is down does not hold the run (trackRun catches).
    if (this.tracked()) await tracking.trackRun({ runId: this.runId, final: 'FINISHED' }).catch(() => undefined);
    await condition(allHandlersFinished);
    status.phase = 'done';
    this.details(`done: ${result.stepsCompleted} steps, policy ${result.policyVersion}`);
    return result;
  }

  /** Validates the config and registers the run; a config a user must fix fails the run with its message on top. */
  private async prepare(): Promise<Prepared> {
    const prepared = await control
      .prepareRun({
        runId: this.runId, config: this.input.config,
        incarnation: workflowInfo().firstExecutionRunId,
        continuing: this.input.resume !== undefined || this.input.recover === true,
        ...(this.input.fork ? { fork: { ...this.input.fork, profileVersion: this.input.resume?.profileVersion ?? null } } : {}),
      })
      .catch((err: unknown) => {
        // Where the UI and CLIs show it.
        if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.nonRetryable) {
          throw ApplicationFailure.nonRetryable(err.cause.message, err.cause.type ?? FAILURE_TYPES.RunConfigError);
        }
        throw err;
      });
    this.config = prepared.config;
    this.configKnown = true;
    this.prepared = prepared;
    const { status } = this;
    status.name = this.config.name;
    status.env = this.config.env.kind;
    status.steps = this.config.steps;
    status.policyVersion ||= this.config.policy.model;
    // Configs recorded before budgets and the health rule have neither.
    status.budget = this.config.budget ?? null;
    if (this.config.health) status.health ??= LEARNING;
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.runName, value: this.config.name },
      { key: SEARCH_ATTRIBUTES.env, value: this.config.env.kind },
      { key: SEARCH_ATTRIBUTES.step, value: status.step },
      ...(status.parent ? [{ key: SEARCH_ATTRIBUTES.parentRun, value: status.parent.runId }] : []),
    ]);
    return prepared;
  }

  /**
   * One training step as a child workflow; the status moves on with its
   * summary. Null when the trainer had lost the run's model: the model was
   * restored and the status rewound to the step after the restored one.
   */
  private async runOneStep(prepared: Prepared): Promise<StepSummary | null> {
    const { status } = this;
    this.stepInFlight = true; // from here a change applies from the next step
    await this.persistConfig();
    this.details(`step ${status.step}/${this.config.steps}, policy ${status.policyVersion}`);
    const restores = status.restores.length;
    status.inFlight = [{ step: status.step, phase: 'rollouts', policyVersion: status.policyVersion, groupsDone: 0, groups: this.config.rollout.tasksPerStep, rescuesStarted: 0, failedGroups: 0 }];
    let summary: StepSummary;
    try {
      summary = await this.untilDone(`step ${status.step}`, () =>
        executeChild(trainingStep, {
          // A step re-run after a restore is a new child: the superseded one keeps its history.
          workflowId: `${this.runId}/step-${status.step}${restores > 0 ? `-r${restores}` : ''}`,
          taskQueue: TASK_QUEUES.control,
          staticSummary: `step ${status.step} of Harness-S run ${this.config.name}`,
          args: [{
            runId: this.runId, step: status.step, config: this.config, policyVersion: status.policyVersion,
            profileVersion: status.profileVersion!, baseHarnessId: prepared.baseHarnessId,
            ...(patched('step-staleness') ? { samplerSteps: status.step } : {}),
          }],
        }),
      );
    } catch (err) {
      const lost = trainerModelLost(err);
      if (lost === null || !patched('trainer-restore')) throw err;
      this.stepInFlight = false;
      status.stepProgress = null;
      status.inFlight = [];
      await restoreLostModel(this.host(), lost, status.step);
      return null;
    } finally {
      status.inFlight = [];
    }
    this.stepInFlight = false;
    this.stepCompleted(summary);
    return summary;
  }

  /** The status moves on with a step's summary (in step order). */
  private stepCompleted(summary: StepSummary): void {
    const { status } = this;
    status.stepProgress = null;
    status.lastStep = summary;
    status.recentSteps = [...status.recentSteps, summary].slice(-RECENT_STEPS);
    status.policyVersion = summary.policyVersion;
    status.step += 1;
    this.deadSinceReanchor.push(...summary.deadTaskIds);
    const spend = stepSpend(summary);
    const spent = status.spent ?? { rollouts: 0, tokens: 0 };
    status.spent = { rollouts: spent.rollouts + spend.rollouts, tokens: spent.tokens + spend.promptTokens + spend.completionTokens };
    if (this.tracked()) void tracking.trackRun({ runId: this.runId }).catch(() => undefined);
    const { health } = this.config;
    if (health) this.checkHealth(afterStep(this.healthWindow, health, summary.liveDrawnFraction ?? summary.liveGroupFraction), summary.step);
  }

  /** Whether the run's budget is spent: no new step starts. */
  private budgetReached(): boolean {
    const { budget } = this.config;
    const spent = this.status.spent;
    if (!budget || !spent) return false;
    return (budget.rollouts !== undefined && spent.rollouts >= budget.rollouts) || (budget.tokens !== undefined && spent.tokens >= budget.tokens);
  }

  /**
   * The health rule over the new window: a change of verdict is shown in the
   * status and the Web UI, reported to the metric, and, with `health.pause`,
   * a newly stalled run pauses with the reason.
   */
  private checkHealth(window: HealthWindow, step: number): void {
    const rule = this.config.health;
    this.healthWindow = window;
    const previous = this.status.health ?? LEARNING;
    const health = assessHealth(rule, window, previous, step);
    this.status.health = health;
    if (health.state === previous.state) return;
    void control.reportRunHealth({ runId: this.runId, health }).catch(() => undefined);
    if (health.state === 'stalled') {
      this.details(`step ${this.status.step}/${this.config.steps}`);
      // Only while steps remain to hold back: a run at its end finishes, marked.
      const stepsLeft = !this.trainingOver && this.status.step < this.config.steps && !this.budgetReached();
      if (rule.pause && !this.status.paused && stepsLeft) {
        this.pausedForStall = true;
        this.pause(`stalled after step ${step}: ${health.reasons.join('; ')}. Change the config or resume to go on: harness-s run resume ${this.runId}`);
      }
    }
  }

  /** Whether the run logs to an experiment tracker (`tracking`; none in configs from before it, so their histories replay unchanged). */
  private tracked(): boolean {
    return this.configKnown && trackersOf(this.config.tracking).length > 0;
  }

  /** A run that fails ends its tracker's run as FAILED, with its report (not a continue-as-new or a cancellation). */
  async trackFailure(err: unknown): Promise<void> {
    if (err instanceof ContinueAsNew || isCancellation(err) || !this.tracked()) return;
    await tracking.trackRun({ runId: this.runId, final: 'FAILED' }).catch(() => undefined);
  }

  /** Whether steps overlap (pipeline.maxStaleness ≥ 1; a config from before pipelining has no section). */
  private pipelined(): boolean {
    return (this.config.pipeline?.maxStaleness ?? 0) > 0;
  }

  /**
   * Pipelined steps up to the next barrier (workflows/step-pipeline.ts): the
   * last completed step's summary, or null when none completed (a pause
   * stopped the pipeline first) or the trainer lost the model (restored).
   */
  private async pipelinedSegment(): Promise<StepSummary | null> {
    const outcome = await this.pipeline.runSegment();
    if (outcome.kind === 'steps') return outcome.last;
    await restoreLostModel(this.host(), outcome.lost, outcome.atStep);
    return null;
  }

  /** The step at which a pipelined segment stops: the next re-anchoring, evaluation or the run's end. */
  private segmentEnd(): number {
    const { step } = this.status;
    const next = (every: number) => (every > 0 ? (Math.floor(step / every) + 1) * every : Infinity);
    const evaluates = this.evaluates() && this.config.eval.every > 0;
    return Math.min(this.config.steps, next(this.config.router.reanchorEvery), evaluates ? next(this.config.eval.every) : Infinity);
  }

  /** Profile version `version`, measured with the current policy: at the start (v1) and at each re-anchoring. */
  private async measureProfiles(prepared: Prepared, version: number, extraTaskIds: string[]): Promise<void> {
    const { status } = this;
    this.details(`measuring behaviour profiles v${version} of ${prepared.harnessIds.length} harnesses with policy ${status.policyVersion}`);
    const profiles = await this.untilDone(`profiles v${version}`, () =>
      executeChild(reanchorProfiles, {
        workflowId: `${this.runId}/profiles-v${version}`,
        taskQueue: TASK_QUEUES.control,
        staticSummary: `behaviour profiles v${version} of Harness-S run ${this.config.name}`,
        args: [{ runId: this.runId, config: this.config, version, policyVersion: status.policyVersion, harnessIds: prepared.harnessIds, extraTaskIds }],
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
  private evaluates(): boolean {
    return patched('evaluate-policy') && (this.config.eval?.enabled ?? false);
  }

  /** evaluatePolicy after `afterSteps` steps, with the current policy and profiles. */
  private async evaluate(prepared: Prepared, afterSteps: number): Promise<void> {
    const { status } = this;
    const phase = status.phase;
    status.phase = 'evaluating';
    this.details(`evaluating ${status.policyVersion} after ${afterSteps} steps: base harness and Rank-1`);
    status.lastEvaluation = await this.untilDone(`evaluation after ${afterSteps} steps`, () => executeChild(evaluatePolicy, {
      workflowId: `${this.runId}/eval-${afterSteps}${status.restores.length > 0 ? `-r${status.restores.length}` : ''}`,
      taskQueue: TASK_QUEUES.control,
      staticSummary: `evaluation after ${afterSteps} steps of Harness-S run ${this.config.name}`,
      args: [{ runId: this.runId, config: this.config, afterSteps, policyVersion: status.policyVersion, profileVersion: status.profileVersion!, baseHarnessId: prepared.baseHarnessId }],
    }));
    status.phase = phase;
    if (this.tracked()) void tracking.trackRun({ runId: this.runId }).catch(() => undefined);
    const { health } = this.config;
    if (health) this.checkHealth(afterEvaluation(this.healthWindow, health, status.lastEvaluation.base.successRate), afterSteps - 1);
  }

  /**
   * Continues as new from the next step, once not paused and no handler is
   * running; a changed config is stored first, and a pause that comes
   * meanwhile is carried over. A recovered run's republish is done: the next
   * execution is a plain continuation.
   */
  private async continueAsNew(): Promise<never> {
    const { status } = this;
    await condition(() => !status.paused && allHandlersFinished());
    await this.persistConfig();
    return continueAsNew<typeof harnessSRun>({
      config: this.config,
      resume: {
        nextStep: status.step, policyVersion: status.policyVersion, profileVersion: status.profileVersion!,
        deadSinceReanchor: [...new Set(this.deadSinceReanchor)], profileShift: status.profileShift, lastEvaluation: status.lastEvaluation,
        ...(status.paused ? { pauseReason: status.pauseReason ?? '' } : {}),
        ...(status.restores.length > 0 ? { restores: status.restores } : {}),
        ...(status.parent ? { parent: status.parent } : {}),
        ...(status.spent ? { spent: status.spent } : {}),
        ...(status.health ? { health: { window: this.healthWindow, health: status.health } } : {}),
      },
    });
  }

  /** What the trainer's recovery (workflows/trainer-recovery.ts) needs of the run. */
  private host(): RecoveryHost {
    return {
      runId: this.runId, status: this.status, config: this.config,
      pause: (reason) => this.pause(reason), details: (now) => this.details(now), untilDone: (what, child) => this.untilDone(what, child),
    };
  }

  /** Stores a changed config, so activities from here on read it. */
  private async persistConfig(fromStep = this.status.step): Promise<void> {
    if (!this.configDirty) return;
    this.configDirty = false;
    await control.updateRunConfig({ runId: this.runId, fromStep, config: this.config });
  }

  /**
   * The run's current details in the Web UI: what the run is (as the CLI's
   * start summary says it; a run started from the UI has no other), then what
   * it does now.
   */
  private details(now: string): void {
    const { name, env, restores, parent } = this.status;
    const what = name ? `Harness-S run ${name} (${env}${isSimulatedEnv(env) ? ', SIMULATED' : ''})` : 'Harness-S run';
    const { health } = this.status;
    const lineage = [
      ...(health?.state === 'stalled' ? [`STALLED since step ${health.sinceStep}: ${health.reasons.join('; ')}`] : []),
      ...(parent ? [`forked from run ${parent.runId} at its checkpoint of step ${parent.step}`] : []),
      ...restores.map((r) =>
        `restore ${r.restore} at ${r.at}: trainer lost the model at step ${r.atStep}; restored from ${r.fromStep === null ? 'the base' : `the checkpoint of step ${r.fromStep}`}, steps ${r.fromStep === null ? 0 : r.fromStep + 1}..${r.atStep} re-run`,
      ),
    ];
    const viewer = this.prepared?.viewerRunUrl ? [`steps, groups and rollouts: ${this.prepared.viewerRunUrl}`] : [];
    setCurrentDetails([what, ...lineage, now, ...replicaLines(this.status.replicas ?? []), ...viewer].join('\n'));
  }

  /**
   * A child (a step, a probe pass) until it succeeds: when an endpoint it
   * needs is down past its retries, the run pauses itself with the reason and
   * runs it again once resumed; the store keeps what was done, so nothing is
   * lost or done twice. Any other failure ends the run, its root cause on top.
   */
  private async untilDone<T>(what: string, child: () => Promise<T>): Promise<T> {
    const pausesOnOutage = patched('pause-on-outage');
    let republishFirst = false;
    for (;;) {
      try {
        // After a resume: the inference replicas that came back get the current version before the child runs again.
        if (republishFirst) await this.republish(this.status.step - 1);
        return await child();
      } catch (err) {
        const outage = outageOf(err);
        if (!pausesOnOutage) throw err;
        if (outage === null) throw runFailure(err);
        this.pause(`${what} stopped: ${outage.replace(/\.$/, '')}. Once it is back: harness-s run resume ${this.runId}`);
        this.details(`paused in ${what}: ${this.status.pauseReason}`);
        await condition(() => !this.status.paused);
        republishFirst = patched('republish-on-resume');
      }
    }
  }

  /**
   * Loads the run's current policy version again on every replica that lacks
   * it (a resume, a recovery): nothing while the run samples the base model.
   */
  private async republish(step: number): Promise<void> {
    const { status } = this;
    if (step < 0 || status.policyVersion === this.config.policy.model) return;
    const outcome = await republishPolicyVersion({ runId: this.runId, step, policyVersion: status.policyVersion }, this.config.retry);
    if (outcome && outcome.replicas.length > 0) status.replicas = withPublish(status.replicas ?? [], outcome.replicas);
  }

  /** The first step a change made now applies from. */
  private nextChangeStep(): number {
    return this.pipelined() ? this.pipeline.nextStep() : this.status.step + (this.stepInFlight ? 1 : 0);
  }
}

/** "step 5 training, step 6 rollouts 3/16": the steps in flight, as the run's current details show them. */
function inFlightLine(inFlight: readonly InFlightStep[]): string {
  return inFlight
    .map((s) => {
      const failed = s.failedGroups ? `, ${s.failedGroups} failed` : '';
      return s.phase === 'rollouts'
        ? `step ${s.step} rollouts on ${s.policyVersion}: ${s.groupsDone}/${s.groups} base groups done, ${s.rescuesStarted} rescues started${failed}`
        : `step ${s.step} ${s.phase.replace(/-/g, ' ')}`;
    })
    .join('; ');
}
