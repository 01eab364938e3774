/**
 * Names shared by workflows, workers and clients: task queues, signals,
 * queries, search attributes, and the shapes that cross the Temporal boundary.
 * Imported by workflow code: no I/O here.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { RunConfig, RunConfigInput } from '../core/config';
import type { FailedGroup, StepSummary } from '../core/rl/step-summary';
import type { EvaluationSummary } from '../core/rl/evaluation';
import type { HealthWindow, RunHealth } from '../core/rl/run-health';
import type { WorkerReplicaViews } from '../core/policy/replicas';
import type { ReplicaPublishOutcome } from './publish';
import type { ReplicaStatus } from './replica-status';
export type { ReplicaStatus } from './replica-status';
import type { TaskRef } from '../core/harness/task';
import type { DrawnGroup } from '../core/rl/batch-fill';
import type { RunSpent } from '../core/run-budget';
export type { RunSpent } from '../core/run-budget';
export type { EvaluationSummary } from '../core/rl/evaluation';
export type { RunSummary, SiblingRescueStats } from '../core/report/run-summary';

export const TASK_QUEUES = {
  control: 'harness-s-control',
  rollout: 'harness-s-rollout',
  trainer: 'harness-s-trainer',
} as const;

export const SEARCH_ATTRIBUTES = {
  runName: defineSearchAttributeKey('HarnessRunName', SearchAttributeType.KEYWORD),
  env: defineSearchAttributeKey('HarnessEnv', SearchAttributeType.KEYWORD),
  step: defineSearchAttributeKey('HarnessStep', SearchAttributeType.INT),
  baseSuccess: defineSearchAttributeKey('HarnessBaseSuccess', SearchAttributeType.DOUBLE),
  /** A fork's parent run id. */
  parentRun: defineSearchAttributeKey('HarnessParentRun', SearchAttributeType.KEYWORD),
} as const;

import type { ParentRun, RestoreEvent } from '../core/run-lineage';

export type { ParentRun, RestoreEvent };

/** Where a run continues from: set by continue-as-new and by `harness-s run recover`. */
export interface ResumePoint {
  nextStep: number;
  policyVersion: string;
  profileVersion: number;
  /** Dead groups' tasks since the last re-anchoring, which the next one probes. */
  deadSinceReanchor?: string[];
  /** The last re-anchoring's shift, so status keeps showing it. */
  profileShift?: number | null;
  /** The last evaluation, so status keeps showing it. */
  lastEvaluation?: EvaluationSummary | null;
  /** The run was paused as it continued as new (a pause that came while it got ready to): the next execution starts paused, for this reason. */
  pauseReason?: string | null;
  /** The restores so far, so status keeps showing them. */
  restores?: RestoreEvent[];
  /** A fork's parent, so status keeps showing it. */
  parent?: ParentRun | null;
  /** What the steps so far spent, toward `budget`. */
  spent?: RunSpent;
  /** The health rule's window and verdict, so it goes on where it was. */
  health?: { window: HealthWindow; health: RunHealth };
}

/** harnessSRun's single argument: what the Temporal UI's start form takes as JSON. */
export interface RunInput {
  config: RunConfigInput;
  resume?: ResumePoint;
  /**
   * Set by `harness-s run recover`: this execution continues a run whose id is
   * already in the store, and first loads its last policy on the inference
   * servers again. Not carried across continue-as-new.
   */
  recover?: boolean;
  /**
   * Set by `harness-s run fork`: before its first step (resume.nextStep, one
   * past `step`), the run's trainer model is loaded from the parent's
   * checkpoint of `step`. Not carried across continue-as-new.
   */
  fork?: ParentRun;
}

export interface RunStatus {
  runId: string;
  name: string;
  env: string;
  phase: 'preparing' | 'profiling' | 'training' | 'evaluating' | 'summarizing' | 'done';
  step: number;
  steps: number;
  policyVersion: string;
  profileVersion: number | null;
  /** How much the last re-anchoring moved the profiles: mean absolute change of the rescue rates. */
  profileShift: number | null;
  paused: boolean;
  pauseReason: string | null;
  /** The running step's groups done and rescues started; null between steps. */
  stepProgress: StepProgress | null;
  lastStep: StepSummary | null;
  /** The last evaluatePolicy result: base harness and Rank-1 success on the eval split. */
  lastEvaluation: EvaluationSummary | null;
  /** The last few steps' summaries (this execution), oldest first. */
  recentSteps: StepSummary[];
  /** Restores of the trainer model after it was lost, oldest first. */
  restores: RestoreEvent[];
  /** A fork's parent; null for a run started anew. */
  parent: ParentRun | null;
  /** The steps running now, oldest first, each in its phase: one unless steps are pipelined (absent before pipelining). */
  inFlight?: InFlightStep[];
  /** What the completed steps spent (absent before spend was counted). */
  spent?: RunSpent;
  /** The run's `budget`, when it has one: training stops at the first step that reaches it. */
  budget?: { rollouts?: number; tokens?: number } | null;
  /** Whether the run is still learning, by its `health` rule (absent from runs started before the rule). */
  health?: RunHealth;
  /** Each inference replica as the steps last reported it (absent before replicas were reported). */
  replicas?: ReplicaStatus[];
}

/**
 * Where a running step is: sampling; its rollouts done and waiting for the previous step's training; training;
 * trained and waiting for the next step's rollouts to end before it publishes (pipelined); publishing.
 */
export type StepPhase = 'rollouts' | 'waiting-for-trainer' | 'training' | 'waiting-to-publish' | 'publishing';

/** A running step, as status shows it. */
export interface InFlightStep extends StepProgress {
  phase: StepPhase;
  /** The policy version sampling its rollouts. */
  policyVersion: string;
}

export interface TrainingStepInput {
  runId: string;
  step: number;
  config: RunConfig;
  /** The policy version that samples the step's rollouts. */
  policyVersion: string;
  profileVersion: number;
  baseHarnessId: string;
  /**
   * Optimizer steps in the sampling policy: the step's staleness is `step - samplerSteps`. Absent from
   * steps started before pipelining.
   */
  samplerSteps?: number;
  /**
   * Pipelined: the step trains only once the run sends `trainGate` (the previous step has trained), and
   * publishes only once it sends `publishGate` (no other step is sampling).
   */
  gated?: boolean;
}

/**
 * One slice of a step too large for one history (workflows/step-slice.ts): the child workflow
 * `<step workflow id>/slice-<i>` plays these tasks' base and rescue groups for the step.
 */
export interface StepSliceInput {
  runId: string;
  step: number;
  config: RunConfig;
  policyVersion: string;
  profileVersion: number;
  baseHarnessId: string;
  slice: number;
  /** The slice's tasks, the first at index `first` of the step's task stream. */
  first: number;
  tasks: TaskRef[];
}

/** What a slice played: each task's groups by its index in the step's stream, in that order, and the groups that failed for good. */
export interface StepSliceResult {
  groups: DrawnGroup[];
  failedGroups: FailedGroup[];
  rescuesStarted: number;
}

/** From a slice to its step, a few times while it plays (workflows/step-slice.ts), so the run shows the step's groups done. */
export interface SliceProgress {
  slice: number;
  groupsDone: number;
  rescuesStarted: number;
  failedGroups: number;
}
export const sliceProgressSignal = defineSignal<[SliceProgress]>('sliceProgress');

export interface ReanchorProfilesInput {
  runId: string;
  config: RunConfig;
  version: number;
  policyVersion: string;
  harnessIds: string[];
  /** Probed besides the fixed probe sample: recent dead groups' tasks. */
  extraTaskIds?: string[];
}

export interface EvaluatePolicyInput {
  runId: string;
  config: RunConfig;
  /** Training steps done: the policy version is the one after them. */
  afterSteps: number;
  policyVersion: string;
  /** The profiles Rank-1 routing reads. */
  profileVersion: number;
  baseHarnessId: string;
}

/**
 * How far the running step is: sent by the step to its run, so the run's own page shows it, when its phase
 * changes and at most every few seconds otherwise (`phase` is absent from steps started before phases were sent).
 */
export interface StepProgress {
  step: number;
  groupsDone: number;
  groups: number;
  rescuesStarted: number;
  failedGroups: number;
  phase?: StepPhase;
  /** The rollout workers' latest views of the replicas (each worker's newest), when one came in since the last progress. */
  replicaViews?: WorkerReplicaViews[];
  /** What publishing the step's version did on each replica, once it has. */
  published?: ReplicaPublishOutcome[];
}
export const stepProgressSignal = defineSignal<[StepProgress]>('stepProgress');
/** From the run to a gated (pipelined) step: the previous step has trained, this one may train now. */
export const trainGateSignal = defineSignal('trainGate');
/** From the run to a gated (pipelined) step that has trained: no step is sampling now, it may publish. */
export const publishGateSignal = defineSignal('publishGate');

export const pauseSignal = defineSignal<[{ reason?: string }?]>('pause');
export const resumeSignal = defineSignal('resume');
export const statusQuery = defineQuery<RunStatus>('status');

/** What `updateConfig` answers: the run's config after the change, from which step it applies. */
export interface ConfigUpdateResult {
  config: RunConfig;
  /** The first step that runs with the new config (the step in flight keeps the old one). */
  fromStep: number;
}

/**
 * Changes safe settings of a running run (see core/config-change.ts), e.g.
 * `{"steps": 40, "eval": {"every": 5}}`; anything else is refused, naming it.
 */
export const updateConfigUpdate = defineUpdate<ConfigUpdateResult, [unknown]>('updateConfig');
