/**
 * Stand-ins for the activities, with the names and shapes createActivities
 * returns, so workflow tests run in seconds without PostgreSQL, the sim
 * cluster or a trainer. Each is a tiny deterministic function over an
 * in-memory record of each run (what the run store would hold), and every
 * call is logged in order for tests to read.
 *
 * The world they play: each training step samples `rollout.tasksPerStep`
 * tasks; its first task is hard (every base rollout fails, so the group is
 * dead and goes to rescue) and siblings rescue it on even samples; every
 * other group succeeds on even samples, so it has a learning signal.
 * A step's batch is kept as the run store would keep it (storeTrainingBatch),
 * and the fake trainer reads it back by reference with the real check
 * (core/rl/training-batch.ts).
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { RunActivities as Activities } from '../../activities';
import { parseRunConfig, RunConfigError, type RunConfig } from '../../core/config';
import type { TaskRef } from '../../core/harness/task';
import type { EvaluationSummary } from '../../core/rl/evaluation';
import type { RolloutSummary } from '../../core/rl/groups';
import { totalSpend, type StepSummary } from '../../core/rl/step-summary';
import { summarizeRunSteps } from '../../core/report/run-summary';
import { checkpointDue } from '../../core/trainer/training-checkpoints';
import { type BatchGroup, readTrainingBatch } from '../../core/rl/training-batch';
import { UserError } from '../../core/errors';
import type { RestoreTrainerResult } from '../../activities/train-step';

/** The one inference replica the fake publishes reach. */
const FAKE_REPLICA = 'http://fake-replica.test/v1';
export const BASE_HARNESS = 'base';
export const SIBLINGS = ['sibling-a', 'sibling-b', 'sibling-c'];
const KINDS = ['sql', 'api'];

export type ActivityName = keyof Activities;
export type ActivityInput<N extends ActivityName> = Parameters<Activities[N]>[0];

export interface ActivityCall {
  name: ActivityName;
  input: { runId: string };
}

/** The policy version the fake trainer names step `step` of run `runId`. */
export const policyVersionAfter = (runId: string, step: number) => `${runId}-step-${step}`;

export const isHardTask = (taskId: string) => taskId.endsWith('-t0');

const taskRef = (taskId: string): TaskRef => ({ taskId, kind: taskId.split('-')[0] });

function trainTasks(step: number, count: number): TaskRef[] {
  return Array.from({ length: count }, (_, i) => taskRef(`${KINDS[i % KINDS.length]}-s${step}-t${i}`));
}

/** What the run store would hold for one run. */
interface RunRecord {
  config: RunConfig;
  steps: StepSummary[];
  evaluations: EvaluationSummary[];
  /** Steps whose training state was checkpointed (checkpoint.every), by the trainer step. */
  checkpoints: number[];
  /** Restores done, by lost model. */
  restores: Map<string, RestoreTrainerResult>;
  /** Training batches by key (the step workflow's id), each group at its index. */
  batches: Map<string, BatchGroup[]>;
  /** What the trainer got, by step (the last call's). */
  trained: Map<number, Array<{ taskId: string; rollouts: Array<{ harnessId: string; sample: number; advantage: number }> }>>;
}

interface Hold {
  name: ActivityName;
  matches(input: unknown): boolean;
  reach(): void;
  released: Promise<void>;
}

export interface HeldActivity {
  /** Resolves when a matching call has started (and is being held). */
  reached: Promise<void>;
  /** Lets the held call go on. */
  release(): void;
}

export interface FakeActivities {
  activities: Activities;
  /** Every call of one run, in the order they started. */
  callsOf(runId: string): ActivityCall[];
  /** The groups the trainer got for a step of a run (its last trainStep call's), by reference or in the input. */
  trainedGroups(
    runId: string,
    step: number,
  ): Array<{ taskId: string; rollouts: Array<{ harnessId: string; sample: number; advantage: number }> }>;
  /** The inputs of one activity's calls for one run, in order. */
  inputsOf<N extends ActivityName>(name: N, runId: string): Array<ActivityInput<N>>;
  /** Holds the next call of `name` that `when` accepts until released (a step in flight, a run summarizing). */
  hold<N extends ActivityName>(name: N, when: (input: ActivityInput<N>) => boolean): HeldActivity;
  /** Lets every held call go on (before the workers shut down). */
  releaseAll(): void;
  /** Makes every call of `name` that `when` accepts throw `error()` (an env that cannot run a task, an endpoint that is down) until stopped. */
  fail<N extends ActivityName>(name: N, when: (input: ActivityInput<N>) => boolean, error: () => Error): { stop(): void };
}

export function createFakeActivities(): FakeActivities {
  const runs = new Map<string, RunRecord>();
  const calls: ActivityCall[] = [];
  const holds: Hold[] = [];
  const releases: Array<() => void> = [];
  const failures: Array<{ name: ActivityName; matches(input: unknown): boolean; error: () => Error }> = [];

  const runOf = (runId: string): RunRecord => {
    const run = runs.get(runId);
    if (!run) throw ApplicationFailure.nonRetryable(`run ${runId} was never prepared`, 'UnknownRun');
    return run;
  };

  const rollouts = (plan: Array<{ harnessId: string; samples: number }>, hard: boolean): RolloutSummary[] =>
    plan.flatMap(({ harnessId, samples }) =>
      Array.from({ length: samples }, (_, sample) => {
        const success = !(hard && harnessId === BASE_HARNESS) && sample % 2 === 0;
        return {
          harnessId,
          sample,
          reward: success ? 1 : 0,
          success,
          failureType: success ? null : 'wrong_answer',
          turns: 2,
          tokens: 10,
          promptTokens: 20,
          completionTokens: 5,
        };
      }),
    );

  const behaviour: Activities = {
    async prepareRun(input) {
      let config: RunConfig;
      try {
        config = parseRunConfig(input.config);
      } catch (err) {
        // As the real activity does: a config a user must fix is not retried.
        if (err instanceof RunConfigError) throw ApplicationFailure.nonRetryable(err.message, err.name);
        throw err;
      }
      const kept = input.continuing ? runs.get(input.runId) : undefined;
      runs.set(input.runId, {
        config,
        steps: kept?.steps ?? [],
        evaluations: kept?.evaluations ?? [],
        checkpoints: kept?.checkpoints ?? [],
        restores: kept?.restores ?? new Map(),
        batches: kept?.batches ?? new Map(),
        trained: kept?.trained ?? new Map(),
      });
      return {
        config,
        poolHash: 'fake-pool',
        baseHarnessId: BASE_HARNESS,
        harnessIds: [BASE_HARNESS, ...SIBLINGS],
        simulated: true,
        viewerRunUrl: `http://127.0.0.1:8240/runs/${encodeURIComponent(input.runId)}`,
      };
    },

    async sampleTasks(input) {
      const { config } = runOf(input.runId);
      if (input.purpose === 'train') return trainTasks(input.step, input.count ?? config.rollout.tasksPerStep);
      return KINDS.map((kind) => taskRef(`${kind}-${input.purpose}-fixed`));
    },

    async describeTasks(input) {
      return input.taskIds.map(taskRef);
    },

    async runRolloutGroup(input) {
      return {
        taskId: input.taskId,
        kind: taskRef(input.taskId).kind,
        role: input.role === 'rescue' ? 'rescue' : 'base',
        rollouts: rollouts(input.plan, isHardTask(input.taskId)),
      };
    },

    async chooseRescueHarnesses(input) {
      const { config } = runOf(input.runId);
      return {
        taskId: input.group.taskId,
        kind: input.group.kind,
        strategy: config.router.strategy,
        profileVersion: input.profileVersion,
        failureSummary: '',
        failureCounts: input.group.failureCounts,
        failureDigest: '',
        chosen: SIBLINGS.slice(0, config.rescue.k),
        scores: {},
        votes: [],
        fallback: false,
      };
    },

    async rank1Routes() {
      return { sql: SIBLINGS[0], api: BASE_HARNESS };
    },

    async updateRunConfig(input) {
      runOf(input.runId).config = input.config;
    },

    async reportRunHealth() {},

    async trackRun() {
      return { trackers: [] };
    },

    async runSpent(input) {
      const steps = runOf(input.runId).steps.filter((s) => s.step < input.beforeStep);
      const spend = totalSpend(steps);
      return { rollouts: spend.rollouts, tokens: spend.policyTokens };
    },

    async recordEvaluation(input) {
      runOf(input.runId).evaluations.push(input.summary);
    },

    async saveProfiles(input) {
      return { version: input.version, cells: input.taskIds.length, shift: input.version > 1 ? 0.1 : null };
    },

    async storeTrainingBatch(input) {
      const run = runOf(input.runId);
      const batch = run.batches.get(input.batchKey) ?? [];
      input.groups.forEach((group, i) => (batch[input.first + i] = group));
      run.batches.set(input.batchKey, batch);
      return { groups: input.groups.length };
    },

    async trainStep(input) {
      const run = runOf(input.runId);
      let groups;
      try {
        const stored = {
          groups: async (_runId: string, key: string, count: number) => (run.batches.get(key) ?? []).slice(0, count).filter(Boolean),
        };
        groups = 'batch' in input ? await readTrainingBatch(stored, input.runId, input.step, input.batch) : input.groups;
      } catch (err) {
        // As the real activity's wrapper does: an error a user must fix is not retried.
        if (err instanceof UserError) throw ApplicationFailure.nonRetryable(err.message, err.name);
        throw err;
      }
      run.trained.set(input.step, groups);
      if (checkpointDue(input.step, run.config) && !run.checkpoints.includes(input.step)) run.checkpoints.push(input.step);
      const datums = groups.reduce((n, g) => n + g.rollouts.length, 0);
      return {
        policyVersion: policyVersionAfter(input.runId, input.step),
        samplerPath: `tinker://fake/${input.runId}/step-${input.step}`,
        datums,
        responseTokens: datums * 10,
        trainerTokens: datums * 30,
        metrics: { loss: 0.5 },
        logprobMismatch: null,
      };
    },

    async restoreTrainer(input) {
      const run = runOf(input.runId);
      const key = input.lostModelId ?? 'fork';
      const done = run.restores.get(key);
      if (done) return done;
      const source = input.fork
        ? runOf(input.fork.parentRunId).checkpoints.filter((s) => s <= input.fork!.atOrBeforeStep)
        : run.checkpoints;
      const fromStep = source.length ? Math.max(...source) : null;
      if (fromStep === null && input.fork)
        throw ApplicationFailure.nonRetryable(`run ${input.fork.parentRunId} has no checkpoint`, 'NoCheckpointError');
      if (fromStep === null && !input.allowBase) return { needsDecision: input.reason };
      const restore = input.fork ? 0 : [...run.restores.keys()].filter((k) => k !== 'fork').length + 1;
      const result: RestoreTrainerResult = {
        restore,
        kind: input.fork ? 'fork' : fromStep === null ? 'base' : 'checkpoint',
        fromStep,
        atStep: input.atStep,
        nextStep: fromStep === null ? 0 : fromStep + 1,
        policyVersion: fromStep === null ? run.config.policy.model : `${input.runId}-restore-${restore}-step-${fromStep}`,
        samplerPath: fromStep === null ? null : `tinker://fake/${input.runId}/restore-${restore}`,
        at: '2026-12-04T00:00:00.000Z',
        reason: input.reason,
      };
      // What the run store does: the steps after the loaded one are superseded.
      if (!input.fork) {
        run.steps = run.steps.filter((s) => s.step <= (fromStep ?? -1));
        run.checkpoints = run.checkpoints.filter((s) => s <= (fromStep ?? -1));
      }
      run.restores.set(key, result);
      return result;
    },

    async publishPolicy() {
      return { servers: 1, probeMeanAbsDiff: null, reloaded: 0 };
    },

    async republishPolicy() {},

    async planPublish(input) {
      return {
        policyVersion: input.policyVersion,
        samplerPath: input.samplerPath,
        replicas: [{ replica: FAKE_REPLICA, via: 'shared-storage' as const }],
      };
    },

    async planRepublish(input) {
      if (input.policyVersion === undefined || input.policyVersion === runOf(input.runId).config.policy.model) return null;
      return {
        policyVersion: input.policyVersion,
        samplerPath: `tinker://fake/${input.runId}/${input.policyVersion}`,
        replicas: [{ replica: FAKE_REPLICA, via: 'shared-storage' as const }],
      };
    },

    async loadPolicyOnReplica(input) {
      return { server: input.replica, probeMeanAbsDiff: null, reloaded: false };
    },

    async recordStep(input) {
      runOf(input.runId).steps.push(input.summary);
    },

    async summarizeRun(input) {
      const { config, steps, evaluations } = runOf(input.runId);
      return summarizeRunSteps(
        { runId: input.runId, name: config.name, simulated: true, basePolicy: config.policy.model },
        steps,
        evaluations,
      );
    },
  };

  /** Logs the call, waits while a hold keeps it, then behaves. */
  const logged = <N extends ActivityName>(name: N, run: Activities[N]) =>
    (async (input: ActivityInput<N>) => {
      calls.push({ name, input });
      const index = holds.findIndex((h) => h.name === name && h.matches(input));
      if (index >= 0) {
        const [held] = holds.splice(index, 1);
        held.reach();
        await held.released;
      }
      const failure = failures.find((f) => f.name === name && f.matches(input));
      if (failure) throw failure.error();
      return (run as (input: ActivityInput<N>) => unknown)(input);
    }) as Activities[N];

  const activities = Object.fromEntries(
    (Object.keys(behaviour) as ActivityName[]).map((name) => [name, logged(name, behaviour[name])]),
  ) as Activities;

  return {
    activities,
    callsOf: (runId) => calls.filter((c) => c.input.runId === runId),
    trainedGroups: (runId, step) => {
      const groups = runOf(runId).trained.get(step);
      if (!groups) throw new Error(`run ${runId}: step ${step} was not trained`);
      return groups;
    },
    inputsOf: <N extends ActivityName>(name: N, runId: string) =>
      calls.filter((c) => c.name === name && c.input.runId === runId).map((c) => c.input as ActivityInput<N>),
    hold(name, when) {
      let reach!: () => void;
      let release!: () => void;
      const reached = new Promise<void>((resolve) => (reach = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      holds.push({ name, matches: (input) => when(input as never), reach, released });
      releases.push(release);
      return { reached, release };
    },
    releaseAll() {
      holds.length = 0;
      for (const release of releases) release();
    },
    fail(name, when, error) {
      const failure = { name, matches: (input: unknown) => when(input as never), error };
      failures.push(failure);
      return { stop: () => void failures.splice(failures.indexOf(failure), 1) };
    },
  };
}
