/**
 * Pipelined steps (`pipeline.maxStaleness` = k ≥ 1): step n+1's rollouts run
 * while step n trains and publishes, on the newest policy version published,
 * so neither the inference servers nor the trainer wait for the other.
 *
 * The rules, kept by `mayStart` and `mayTrain`:
 * - one rollout phase at a time: step s starts once step s-1's rollouts are
 *   done (the inference servers sample one policy version at a time, and the
 *   task stream is drawn in step order);
 * - the bound: step s trains a model that has had s optimizer steps; it starts
 *   only once the newest published version has at least s - k of them, so no
 *   trajectory is trained more than k versions after the one that sampled it
 *   (a step that would be staler waits: `pipeline.whenStale: wait`);
 * - training in step order: step s trains once step s-1 has trained (the
 *   run sends it `trainGate`), so optimizer steps = training steps;
 * - publishing never beside sampling: a trained step publishes once no step
 *   is sampling (the run sends it `publishGate`), and no step starts
 *   sampling while one publishes, so an inference server never serves two
 *   policy versions at once (the new one's probe beside the old one's
 *   rollouts: vLLM's CPU build crashes on a batch mixing LoRA adapters);
 * - publishing in step order: a trained step publishes once the steps before
 *   it have (patch `publish-in-order`), so an older version never goes out
 *   after a newer one;
 * - steps complete (the status moves on) in step order.
 *
 * A segment runs steps up to the next barrier: a re-anchoring or evaluation
 * due after a step, the run's last step, a pause (which drains the pipeline:
 * steps in flight finish, no new one starts) or a suggested continue-as-new.
 * If the trainer loses the run's model, the other steps in flight are
 * cancelled and the run restores (workflows/run.ts).
 *
 * Workflow code: deterministic, no I/O.
 */
import { CancellationScope, condition, isCancellation, patched, startChild } from '@temporalio/workflow';
import type { RunConfig } from '../core/config';
import type { StepSummary } from '../core/rl/step-summary';
import { type InFlightStep, publishGateSignal, type RunStatus, type StepProgress, TASK_QUEUES, trainGateSignal } from './definitions';
import { trainerModelLost } from './failures';
import { trainingStep } from './training-step';

/** What the pipeline needs from its run. */
export interface PipelineHost {
  readonly runId: string;
  readonly status: RunStatus;
  config(): RunConfig;
  baseHarnessId(): string;
  /** No new step may start: paused, or continue-as-new is due. */
  holds(): boolean;
  /** The first step after which the run stops for a barrier (re-anchoring, evaluation, the end): steps below it may run. */
  segmentEnd(): number;
  /** Stores a changed config before step `fromStep` starts. */
  persistConfig(fromStep: number): Promise<void>;
  untilDone<T>(what: string, child: () => Promise<T>): Promise<T>;
  /** A step's summary, in step order. */
  completed(summary: StepSummary): void;
  details(now: string): void;
}

/** How a segment ended: steps completed, or the trainer lost its model at `atStep` (the other steps were cancelled). */
export type SegmentOutcome =
  { kind: 'steps'; last: StepSummary | null } | { kind: 'model-lost'; atStep: number; lost: { modelId: string | null; message: string } };

interface Running {
  scope: CancellationScope;
  rolloutsDone: boolean;
  trained: boolean;
  /** Its publish gate was opened: it publishes until it completes. */
  publishing: boolean;
}

export class StepPipeline {
  private readonly running = new Map<number, Running>();
  private readonly finished = new Map<number, StepSummary>();
  private events = 0;
  private nextStart = 0;
  /** The segment's barrier, fixed when it starts: no step at or past it starts in this segment. */
  private end = 0;

  constructor(private readonly host: PipelineHost) {}

  /** The first step a config change made now applies to: the next one to start. */
  nextStep(): number {
    return Math.max(this.nextStart, this.host.status.step);
  }

  /** Something a waiting segment may act on happened (a step's phase, a pause or resume, a config change). */
  poke(): void {
    this.events += 1;
  }

  /** A step's progress signal: its phase moves the pipeline. */
  progressed(progress: StepProgress): void {
    const r = this.running.get(progress.step);
    if (!r) return;
    if (progress.phase !== undefined && progress.phase !== 'rollouts') r.rolloutsDone = true;
    if (progress.phase === 'waiting-to-publish' || progress.phase === 'publishing') r.trained = true;
    this.poke();
  }

  async runSegment(): Promise<SegmentOutcome> {
    const { status } = this.host;
    this.nextStart = status.step;
    this.end = this.host.segmentEnd();
    let last: StepSummary | null = null;
    let failure: { err: unknown } | null = null;
    let lost: { atStep: number; lost: { modelId: string | null; message: string } } | null = null;
    for (;;) {
      while (this.finished.has(status.step)) {
        last = this.finished.get(status.step)!;
        this.finished.delete(status.step);
        this.host.completed(last);
      }
      const stopping = failure !== null || lost !== null;
      if (!stopping && !this.host.holds() && this.mayStart(this.nextStart)) {
        const step = this.nextStart++;
        await this.host.persistConfig(step);
        this.start(step, (err) => {
          const modelLost = trainerModelLost(err);
          if (modelLost && lost === null && failure === null) lost = { atStep: step, lost: modelLost };
          else if (!modelLost && failure === null) failure = { err };
          for (const r of this.running.values()) r.scope.cancel();
        });
        continue;
      }
      if (this.running.size === 0) break;
      const seen = this.events;
      await condition(() => this.events !== seen);
    }
    this.finished.clear();
    status.inFlight = [];
    if (failure !== null) throw (failure as { err: unknown }).err;
    if (lost !== null) return { kind: 'model-lost', ...(lost as { atStep: number; lost: { modelId: string | null; message: string } }) };
    return { kind: 'steps', last };
  }

  private mayStart(step: number): boolean {
    const { status } = this.host;
    const config = this.host.config();
    if (step >= Math.min(config.steps, this.end)) return false; // the barrier, or the run's end (steps may change meanwhile)
    const k = config.pipeline.maxStaleness;
    if (step - status.step > k) return false; // the newest published version would be too stale by the time it trains
    for (const [other, r] of this.running) {
      if (other < step && !r.rolloutsDone) return false; // one rollout phase at a time
      if (r.publishing) return false; // no sampling beside a publish
    }
    return true;
  }

  /**
   * Step `step` may publish: no other step is sampling, and (`inOrder`) every
   * earlier step has published, so versions go out in step order. Histories
   * recorded before `publish-in-order` let a step publish beside an earlier one.
   */
  private mayPublish(step: number, inOrder: boolean): boolean {
    for (const [other, r] of this.running) {
      if (other !== step && !r.rolloutsDone) return false;
      if (inOrder && other < step) return false;
    }
    return true;
  }

  /** Step `step` may train: every earlier step has trained. */
  private mayTrain(step: number): boolean {
    for (const [other, r] of this.running) if (other < step && !r.trained) return false;
    return true;
  }

  private start(step: number, onFailure: (err: unknown) => void): void {
    const { status, runId } = this.host;
    const config = this.host.config();
    const scope = new CancellationScope();
    const entry: Running = { scope, rolloutsDone: false, trained: false, publishing: false };
    this.running.set(step, entry);
    const shown: InFlightStep = {
      step,
      phase: 'rollouts',
      policyVersion: status.policyVersion,
      groupsDone: 0,
      groups: config.rollout.tasksPerStep,
      rescuesStarted: 0,
      failedGroups: 0,
    };
    status.inFlight = [...(status.inFlight ?? []), shown];
    const restores = status.restores.length;
    const args = {
      runId,
      step,
      config,
      policyVersion: status.policyVersion,
      profileVersion: status.profileVersion!,
      baseHarnessId: this.host.baseHarnessId(),
      samplerSteps: status.step,
      gated: true,
    };
    this.host.details(`step ${step} started on ${status.policyVersion} (${step - status.step} version(s) behind when it trains)`);
    void scope
      .run(() =>
        this.host.untilDone(`step ${step}`, async () => {
          const child = await startChild(trainingStep, {
            workflowId: `${runId}/step-${step}${restores > 0 ? `-r${restores}` : ''}`,
            taskQueue: TASK_QUEUES.control,
            staticSummary: `step ${step} of Harness-S run ${config.name} (pipelined)`,
            args: [args],
          });
          // Opens the step's gates once the steps before it have trained, and once it has trained, no other step
          // samples and the steps before it have published (again for a step run again after an outage).
          const inOrder = patched('publish-in-order');
          void condition(() => this.mayTrain(step))
            .then(() => child.signal(trainGateSignal))
            .then(() => condition(() => entry.trained && this.mayPublish(step, inOrder)))
            .then(() => {
              entry.publishing = true;
              return child.signal(publishGateSignal);
            })
            .catch(() => undefined);
          return child.result();
        }),
      )
      .then(
        (summary) => {
          this.finished.set(step, summary);
          entry.trained = entry.rolloutsDone = true;
        },
        (err: unknown) => {
          if (!isCancellation(err)) onFailure(err);
        },
      )
      .finally(() => {
        this.running.delete(step);
        status.inFlight = (status.inFlight ?? []).filter((s) => s.step !== step);
        this.poke();
      });
  }
}
