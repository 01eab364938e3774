/**
 * The in-process side of the overhead bench: a step's base rollouts run with
 * the harness runtime directly (as activities/rollouts.ts runs them, with the
 * same seeds, concurrency and sim cluster, but no Temporal), and the run-store
 * writes of those rows timed alone.
 */
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { mapWithConcurrency } from '../concurrency';
import type { RunConfig } from '../config';
import type { Environment } from '../harness/environment';
import type { SimWorld } from '../envs/sim/world';
import { runEpisode } from '../harness/runtime';
import { selectPool, splitPool } from '../harness/pool';
import { PolicyClient } from '../policy/client';
import type { Trajectory } from '../policy/trajectory';
import { hashSeed } from '../random';
import { tasksFor } from '../rl/task-sampling';
import { apiKeyOf } from '../secrets';
import type { RunStore } from '../store/run-store';
import { SIM_KIND } from '../sim-kind';

/**
 * A copy of a sim world with enough tasks per kind that `trainTasks` distinct
 * tasks remain after the eval split holds out `heldOut` of each kind. All
 * tasks of a kind are the same task to the sim policy (docs/sim.md), so only
 * the count changes. Written to `file`; returns the world.
 */
export function writeScaledWorld(world: SimWorld, trainTasks: number, heldOut: number, file: string): SimWorld {
  const perKind = Math.ceil(trainTasks / world.kinds.length / (1 - heldOut)) + 2;
  const scaled = { ...world, name: `${world.name}-bench`, kinds: world.kinds.map((k) => ({ ...k, tasks: Math.max(k.tasks, perKind) })) };
  writeFileSync(file, `${JSON.stringify(scaled, null, 2)}\n`);
  return scaled;
}

/** The tasks of a step, the base harness and the rollouts' seeds, exactly as the workflow's activities pick them. */
function stepPlan(config: RunConfig, env: Environment, step: number) {
  const tasks = tasksFor(
    env.listTasks(),
    'train',
    {
      seed: config.seed,
      tasksPerStep: config.rollout.tasksPerStep,
      heldOut: config.eval.heldOut,
      probeTasksPerKind: config.router.probeTasksPerKind,
      evalTasksPerKind: config.eval.tasksPerKind,
    },
    step,
  );
  const { base } = splitPool(selectPool(env.harnesses(), config.harnessPool).pool);
  return { tasks, base };
}

export interface InProcessResult {
  ms: number;
  trajectories: Trajectory[][];
}

/** Where the in-process rollouts are stored, when they are: a scratch run (`withScratchRun`). */
export interface ScratchRun {
  store: RunStore;
  runId: string;
}

/**
 * Step `step`'s base groups, in process: `groupsAtOnce` groups at once (the
 * rollout worker's activity slots), each with `rollout.concurrency` episodes
 * at once, sampled from `policyVersion`. With `storeIn`, each group writes as
 * runRolloutGroup does (rolloutSummaries, each rollout inserted as it ends,
 * rolloutSummaries); otherwise nothing is stored.
 */
export async function runRolloutsInProcess(args: {
  config: RunConfig;
  env: Environment;
  step: number;
  policyVersion: string;
  groupsAtOnce: number;
  storeIn?: ScratchRun;
}): Promise<InProcessResult> {
  const { config, env, step, storeIn } = args;
  const { tasks, base } = stepPlan(config, env, step);
  const policy = new PolicyClient({ ...config.policy, apiKey: apiKeyOf(config.policy, 'policy') });
  const G = config.rollout.groupSize;
  const groups: Trajectory[][] = tasks.map(() => []);
  const summaries = (taskId: string) => storeIn?.store.rolloutSummaries(storeIn.runId, 'train', step, taskId, [base.id]);
  const started = performance.now();
  await mapWithConcurrency(
    tasks.map((task, i) => ({ task, i })),
    args.groupsAtOnce,
    async ({ task, i }) => {
      await summaries(task.taskId);
      await mapWithConcurrency(
        Array.from({ length: G }, (_, sample) => sample),
        config.rollout.concurrency,
        async (sample) => {
          const trajectory = await runEpisode({
            env,
            harness: base,
            policy,
            model: args.policyVersion,
            taskId: task.taskId,
            sample,
            maxTurns: config.rollout.maxTurns,
            maxTokens: config.rollout.maxTokens,
            temperature: config.policy.temperature,
            seed: hashSeed(config.seed, 'train', step, task.taskId, base.id, sample),
          });
          await storeIn?.store.insertTrajectories(storeIn.runId, 'train', step, 'base', [trajectory]);
          groups[i].push(trajectory);
        },
      );
      await summaries(task.taskId);
    },
  );
  return { ms: performance.now() - started, trajectories: groups };
}

/** Runs `work` with a scratch run registered in the store; the run and its rows are deleted after. */
export async function withScratchRun<T>(store: RunStore, what: string, work: (scratch: ScratchRun) => Promise<T>): Promise<T> {
  const runId = `bench-${what}-${Date.now().toString(36)}-${Math.floor(Math.random() * 1e6).toString(36)}`;
  await store.registerRun({ runId, name: `bench-${what}`, env: SIM_KIND, config: {}, incarnation: runId, takeOver: false });
  try {
    return await work({ store, runId });
  } finally {
    await store.deleteRun(runId);
  }
}

/**
 * The run-store writes of these groups as runRolloutGroup makes them, timed
 * alone (no episodes between them): per group, rolloutSummaries, one
 * insertTrajectories per rollout (`rollout.concurrency` at once),
 * rolloutSummaries again; `groupsAtOnce` groups at once.
 */
export async function timeStoreWrites(
  scratch: ScratchRun,
  groups: Trajectory[][],
  concurrency: number,
  groupsAtOnce: number,
): Promise<number> {
  const { store, runId } = scratch;
  const started = performance.now();
  await mapWithConcurrency(groups, groupsAtOnce, async (group) => {
    if (group.length === 0) return;
    const { taskId, harnessId } = group[0];
    await store.rolloutSummaries(runId, 'train', 0, taskId, [harnessId]);
    await mapWithConcurrency(group, concurrency, async (t) => {
      await store.insertTrajectories(runId, 'train', 0, 'base', [t]);
    });
    await store.rolloutSummaries(runId, 'train', 0, taskId, [harnessId]);
  });
  return performance.now() - started;
}
