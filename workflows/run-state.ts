/**
 * The state of a Harness-S run (workflows/run.ts): its status (what the
 * status query shows), its config (changed by the updateConfig update), and
 * the flags that say where the loop is. Signal, query and update handlers are
 * its methods; what the run does with them is in the run-*.ts files beside it.
 *
 * Workflow code: deterministic, no I/O.
 */
import {
  ApplicationFailure,
  condition,
  ContinueAsNew,
  isCancellation,
  proxyActivities,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { RunConfig } from '../core/config';
import { applyConfigChange, parseConfigChange } from '../core/config-change';
import { FAILURE_TYPES } from '../core/failure-types';
import { type HealthWindow, LEARNING } from '../core/rl/run-health';
import { trackersOf } from '../core/tracking/tracker-configs';
import { type RunInput, type RunStatus, SEARCH_ATTRIBUTES, type StepProgress } from './definitions';
import { controlActivityOptions, trackingActivityOptions } from './activity-options';
import { StepPipeline } from './step-pipeline';
import type { RecoveryHost } from './trainer-recovery';
import { withPublish, withWorkerViews } from './replica-status';
import { details, inFlightLine, STEP_PHASES } from './run-status';
import { segmentEnd, stepCompleted } from './run-steps';
import { budgetReached } from './run-health';
import { untilDone } from './run-outage';

const control = proxyActivities<Activities>(controlActivityOptions());
const tracking = proxyActivities<Activities>(trackingActivityOptions());

export interface Prepared {
  baseHarnessId: string;
  harnessIds: string[];
  viewerRunUrl: string | null;
}

export class HarnessSRun {
  readonly runId = workflowInfo().workflowId;
  readonly status: RunStatus;
  /** Set once prepareRun has validated it; changed by updateConfig. */
  config!: RunConfig;
  configKnown = false;
  /** A changed config not yet stored: activities read the stored one, so it is stored before the next ones start. */
  configDirty = false;
  /** A step is running: a change applies from the next step. */
  stepInFlight = false;
  trainingOver = false;
  readonly deadSinceReanchor: string[];
  prepared: Prepared | null = null;
  readonly pipeline: StepPipeline;
  /** What the health rule looks at (core/rl/run-health.ts). */
  healthWindow: HealthWindow;
  /** The run paused itself because it stalled: a resume starts the rule's window over. */
  pausedForStall = false;

  constructor(readonly input: RunInput) {
    this.status = {
      runId: this.runId,
      name: '',
      env: '',
      phase: 'preparing',
      step: input.resume?.nextStep ?? 0,
      steps: 0,
      policyVersion: input.resume?.policyVersion ?? '',
      profileVersion: input.resume?.profileVersion ?? null,
      profileShift: input.resume?.profileShift ?? null,
      paused: false,
      pauseReason: null,
      stepProgress: null,
      lastStep: null,
      lastEvaluation: input.resume?.lastEvaluation ?? null,
      recentSteps: [],
      restores: [...(input.resume?.restores ?? [])],
      parent: input.fork ?? input.resume?.parent ?? null,
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
      holds: () => this.status.paused || workflowInfo().continueAsNewSuggested || budgetReached(this),
      segmentEnd: () => segmentEnd(this),
      persistConfig: (fromStep) => this.persistConfig(fromStep),
      untilDone: (what, child) => untilDone(this, what, child),
      completed: (summary) => {
        stepCompleted(this, summary);
        upsertSearchAttributes([
          { key: SEARCH_ATTRIBUTES.step, value: this.status.step },
          { key: SEARCH_ATTRIBUTES.baseSuccess, value: summary.baseSuccessRate },
        ]);
      },
      details: (now) =>
        details(this, `step ${this.status.step}/${this.config.steps}, pipelined (k = ${this.config.pipeline.maxStaleness}): ${now}`),
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
      details(this, `step ${this.status.step}/${this.config.steps}: ${inFlightLine(inFlight)}`);
      return;
    }
    const failed = progress.failedGroups ? `, ${progress.failedGroups} failed` : '';
    const phase = shown.phase === 'rollouts' ? '' : ` (${shown.phase.replace(/-/g, ' ')})`;
    details(
      this,
      `step ${progress.step}/${this.config.steps}, policy ${this.status.policyVersion}: ${progress.groupsDone}/${progress.groups} base groups done, ${progress.rescuesStarted} rescues started${failed}${phase}`,
    );
  }

  /**
   * Safe config changes while the run goes on (core/config-change.ts): the
   * config after `change`, or why not (an ApplicationFailure: the update
   * fails, the run goes on). Before the config is known, the change's shape only.
   */
  checkChange(change: unknown): RunConfig | null {
    if (this.trainingOver)
      throw ApplicationFailure.nonRetryable(
        `run ${this.runId} has run all its steps; its config no longer changes`,
        FAILURE_TYPES.RunConfigError,
      );
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

  /** Whether the run logs to an experiment tracker (`tracking`; none in configs from before it, so their histories replay unchanged). */
  tracked(): boolean {
    return this.configKnown && trackersOf(this.config.tracking).length > 0;
  }

  /** A run that fails ends its tracker's run as FAILED, with its report (not a continue-as-new or a cancellation). */
  async trackFailure(err: unknown): Promise<void> {
    if (err instanceof ContinueAsNew || isCancellation(err) || !this.tracked()) return;
    await tracking.trackRun({ runId: this.runId, final: 'FAILED' }).catch(() => undefined);
  }

  /** Whether steps overlap (pipeline.maxStaleness ≥ 1). */
  pipelined(): boolean {
    return this.config.pipeline.maxStaleness > 0;
  }

  /** What the trainer's recovery (workflows/trainer-recovery.ts) needs of the run. */
  host(): RecoveryHost {
    return {
      runId: this.runId,
      status: this.status,
      config: this.config,
      pause: (reason) => this.pause(reason),
      details: (now) => details(this, now),
      untilDone: (what, child) => untilDone(this, what, child),
    };
  }

  /** Stores a changed config, so activities from here on read it. */
  async persistConfig(fromStep = this.status.step): Promise<void> {
    if (!this.configDirty) return;
    this.configDirty = false;
    await control.updateRunConfig({ runId: this.runId, fromStep, config: this.config });
  }

  /** The first step a change made now applies from. */
  nextChangeStep(): number {
    return this.pipelined() ? this.pipeline.nextStep() : this.status.step + (this.stepInFlight ? 1 : 0);
  }
}
