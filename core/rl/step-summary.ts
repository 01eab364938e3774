/**
 * What one training step did, in numbers small enough for a workflow history:
 * base success, dead and rescued groups, and each sibling's rescue record.
 */
import type { GroupSummary, TrainingGroup } from './groups';
import { isDeadGroup } from './rescue';
import type { DroppedGroup } from './batch-fill';
import type { LogprobMismatch } from './logprob-mismatch';
import { meanAndStdErr } from '../stats';

export interface SiblingStepStats {
  groupsChosen: number;
  groupsRescued: number;
  rollouts: number;
  successes: number;
}

export interface StepSummary {
  step: number;
  policyVersionBefore: string;
  policyVersion: string;
  profileVersion: number;
  tasks: number;
  baseRollouts: number;
  rescueRollouts: number;
  baseSuccessRate: number;
  /** Mean reward of the base rollouts, and its standard error over them. */
  baseMeanReward: number;
  baseRewardStdErr: number;
  deadGroups: number;
  /** The tasks whose base group was dead: the next re-anchoring probes them. */
  deadTaskIds: string[];
  rescuedGroups: number;
  /** Groups with a non-zero advantage somewhere, over all groups in the batch. */
  liveGroupFraction: number;
  /** harness id -> task kind -> stats, for the siblings used to rescue this step. */
  siblings: Record<string, Record<string, SiblingStepStats>>;
  datums: number;
  trainerMetrics: Record<string, number>;
  /** The trainer's log-probs of the trained tokens against the sampler's; null when nothing was trained. */
  logprobMismatch: LogprobMismatch | null;
  /** After publishing: the largest mean |Δ| between an inference server's log-probs of the probe and the trainer's. */
  publishProbeMeanAbsDiff: number | null;
  durationSeconds: number;
  /** Wall time of the step's phases: rollouts (base and rescue groups), the trainer's update, publishing. */
  phaseSeconds: StepPhaseSeconds | null;
  /** Groups whose rollouts failed for good (a task its environment cannot run): left out of training, with why. */
  failedGroups: FailedGroup[];
  /**
   * How many policy versions the trained model was ahead of the one that sampled the step's rollouts
   * (0 unless steps are pipelined), and the trained rollouts counted by it. Absent from steps recorded before pipelining.
   */
  staleness?: number;
  stalenessHistogram?: Record<string, number>;
  /** What the step spent (absent from steps recorded before it was counted). */
  spend?: StepSpend;
  /** How the batch was filled past its first tasks (`sampling.refill`; absent without a refill). */
  sampling?: StepSampling;
  /** Groups with a non-zero advantage over every group the step drew, dropped ones included (absent before refills). */
  liveDrawnFraction?: number;
}

/** A step's cost. */
export interface StepSpend {
  /** Every rollout the step ran: base, rescue and refill groups. */
  rollouts: number;
  /** The inference server's prompt and completion tokens of those rollouts (each turn's whole prompt). */
  promptTokens: number;
  completionTokens: number;
  /** The tokens the trainer's forward_backward processed. */
  trainerTokens: number;
  /** SIMULATED: GPU-seconds of the step under the sim cluster's latency model, where it runs (sim-cluster/latency.ts). */
  gpuSeconds?: number;
}

/** A step's spend; a step recorded before spend was counted has its rollouts only. */
export function stepSpend(step: Pick<StepSummary, 'spend' | 'baseRollouts' | 'rescueRollouts'>): StepSpend {
  return step.spend ?? { rollouts: step.baseRollouts + step.rescueRollouts, promptTokens: 0, completionTokens: 0, trainerTokens: 0 };
}

/** A run's spend over its steps. */
export interface RunSpend {
  rollouts: number;
  /** The policy's prompt + completion tokens. */
  policyTokens: number;
  promptTokens: number;
  completionTokens: number;
  trainerTokens: number;
  /** SIMULATED GPU-seconds under the sim's latency model; null unless every step had them. */
  gpuSeconds: number | null;
}

export function totalSpend(steps: ReadonlyArray<Pick<StepSummary, 'spend' | 'baseRollouts' | 'rescueRollouts'>>): RunSpend {
  const spends = steps.map(stepSpend);
  const sum = (pick: (s: StepSpend) => number) => spends.reduce((n, s) => n + pick(s), 0);
  const promptTokens = sum((s) => s.promptTokens);
  const completionTokens = sum((s) => s.completionTokens);
  const timed = spends.length > 0 && spends.every((s) => s.gpuSeconds !== undefined);
  return {
    rollouts: sum((s) => s.rollouts),
    policyTokens: promptTokens + completionTokens,
    promptTokens,
    completionTokens,
    trainerTokens: sum((s) => s.trainerTokens),
    gpuSeconds: timed ? sum((s) => s.gpuSeconds ?? 0) : null,
  };
}

export interface StepSampling {
  refill: 'dynamic' | 'matched';
  /** Tasks drawn from the stream, the first tasksPerStep included. */
  drawn: number;
  /** Groups left out of the batch for want of signal (dynamic sampling). */
  dropped: DroppedGroup[];
}

export interface StepPhaseSeconds {
  rollout: number;
  train: number;
  publish: number;
  /** Pipelined steps: rollouts done, waiting for the previous step's training (absent otherwise). */
  waitForTrainer?: number;
  /** Pipelined steps: trained, waiting for the next step's rollouts to end before publishing (absent otherwise). */
  waitToPublish?: number;
}

export interface FailedGroup {
  taskId: string;
  role: 'base' | 'rescue';
  reason: string;
}

export function summarizeStep(args: {
  step: number;
  policyVersionBefore: string;
  policyVersion: string;
  profileVersion: number;
  baseGroups: readonly GroupSummary[];
  rescueGroups: readonly GroupSummary[];
  trainingGroups: readonly TrainingGroup[];
  datums: number;
  trainerMetrics: Record<string, number>;
  logprobMismatch?: LogprobMismatch | null;
  publishProbeMeanAbsDiff?: number | null;
  durationSeconds: number;
  phaseSeconds?: StepPhaseSeconds | null;
  failedGroups?: FailedGroup[];
  /** Policy versions between the sampler's and the trained model's (pipelined steps). */
  staleness?: number;
  trainerTokens?: number;
  sampling?: StepSampling;
}): StepSummary {
  const baseRollouts = args.baseGroups.flatMap((g) => g.rollouts);
  const siblings: StepSummary['siblings'] = {};
  for (const group of args.rescueGroups) {
    const harnesses = [...new Set(group.rollouts.map((r) => r.harnessId))];
    for (const harnessId of harnesses) {
      const mine = group.rollouts.filter((r) => r.harnessId === harnessId);
      const byKind = (siblings[harnessId] ??= {});
      const stats = (byKind[group.kind] ??= { groupsChosen: 0, groupsRescued: 0, rollouts: 0, successes: 0 });
      const successes = mine.filter((r) => r.success).length;
      stats.groupsChosen += 1;
      stats.groupsRescued += successes > 0 ? 1 : 0;
      stats.rollouts += mine.length;
      stats.successes += successes;
    }
  }
  const live = args.trainingGroups.filter((g) => g.rollouts.some((r) => r.advantage !== 0)).length;
  const reward = meanAndStdErr(baseRollouts.map((r) => r.reward));
  const ran = [...args.baseGroups, ...args.rescueGroups].flatMap((g) => g.rollouts);
  const drawnGroups = args.trainingGroups.length + (args.sampling?.dropped.length ?? 0);
  return {
    step: args.step,
    policyVersionBefore: args.policyVersionBefore,
    policyVersion: args.policyVersion,
    profileVersion: args.profileVersion,
    tasks: args.baseGroups.length,
    baseRollouts: baseRollouts.length,
    rescueRollouts: args.rescueGroups.reduce((n, g) => n + g.rollouts.length, 0),
    baseSuccessRate: baseRollouts.length ? baseRollouts.filter((r) => r.success).length / baseRollouts.length : 0,
    baseMeanReward: reward.mean,
    baseRewardStdErr: reward.stdErr,
    deadGroups: args.baseGroups.filter(isDeadGroup).length,
    deadTaskIds: args.baseGroups.filter(isDeadGroup).map((g) => g.taskId),
    rescuedGroups: args.rescueGroups.filter((g) => !isDeadGroup(g)).length,
    liveGroupFraction: args.trainingGroups.length ? live / args.trainingGroups.length : 0,
    siblings,
    datums: args.datums,
    trainerMetrics: args.trainerMetrics,
    logprobMismatch: args.logprobMismatch ?? null,
    publishProbeMeanAbsDiff: args.publishProbeMeanAbsDiff ?? null,
    durationSeconds: args.durationSeconds,
    phaseSeconds: args.phaseSeconds ?? null,
    failedGroups: args.failedGroups ?? [],
    ...(args.staleness !== undefined && {
      staleness: args.staleness,
      stalenessHistogram: { [String(args.staleness)]: args.trainingGroups.reduce((n, g) => n + g.rollouts.length, 0) },
    }),
    spend: {
      rollouts: ran.length,
      promptTokens: ran.reduce((n, r) => n + (r.promptTokens ?? 0), 0),
      completionTokens: ran.reduce((n, r) => n + (r.completionTokens ?? 0), 0),
      trainerTokens: args.trainerTokens ?? 0,
    },
    ...(args.sampling && { sampling: args.sampling, liveDrawnFraction: drawnGroups ? live / drawnGroups : 0 }),
  };
}

/** The trainer/sampler mismatch of the steps trained at one staleness: what the overlap costs in off-policyness. */
export interface StalenessMismatch {
  steps: number;
  rollouts: number;
  /** Token-weighted mean |trainer - sampler| log-prob; null when none was measured. */
  meanAbsDiff: number | null;
  /** Mean over steps of the importance ratio's mean and of its standard deviation. */
  ratioMean: number | null;
  ratioStd: number | null;
}

/** Steps grouped by their staleness (steps recorded before pipelining count as 0). */
export function mismatchByStaleness(
  steps: ReadonlyArray<Pick<StepSummary, 'logprobMismatch' | 'staleness' | 'stalenessHistogram' | 'datums'>>,
): Record<string, StalenessMismatch> {
  const out: Record<string, StalenessMismatch & { tokens: number; sumDiff: number; sumMean: number; sumStd: number; measured: number }> =
    {};
  for (const s of steps) {
    const key = String(s.staleness ?? 0);
    const e = (out[key] ??= {
      steps: 0,
      rollouts: 0,
      meanAbsDiff: null,
      ratioMean: null,
      ratioStd: null,
      tokens: 0,
      sumDiff: 0,
      sumMean: 0,
      sumStd: 0,
      measured: 0,
    });
    e.steps += 1;
    e.rollouts += Object.values(s.stalenessHistogram ?? {}).reduce((n, c) => n + c, 0);
    const m = s.logprobMismatch;
    if (m && m.tokens > 0) {
      e.tokens += m.tokens;
      e.sumDiff += m.meanAbsDiff * m.tokens;
      e.sumMean += m.ratioMean;
      e.sumStd += m.ratioStd;
      e.measured += 1;
    }
  }
  return Object.fromEntries(
    Object.entries(out).map(([k, e]) => [
      k,
      {
        steps: e.steps,
        rollouts: e.rollouts,
        meanAbsDiff: e.tokens > 0 ? e.sumDiff / e.tokens : null,
        ratioMean: e.measured ? e.sumMean / e.measured : null,
        ratioStd: e.measured ? e.sumStd / e.measured : null,
      },
    ]),
  );
}
