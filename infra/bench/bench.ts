/**
 * `harness-s bench`, its core: on the Temporal server and run store it is
 * given (with workers serving the three queues), it measures
 * (a) the orchestration overhead per rollout, in-process vs as activities,
 * (b) step time and throughput per latency profile and staleness bound k
 *     (SIMULATED by the sim cluster's latency model),
 * (c) the runs' Temporal history sizes.
 * It starts its own sim clusters on free ports and stops them after.
 */
import os from 'node:os';
import path from 'node:path';
import { mkdirSync, rmSync } from 'node:fs';
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import {
  type BenchResult,
  type BenchRow,
  type OverheadFigures,
  type RunHistory,
  historyFigures,
  overheadFigures,
  rowFigures,
} from '../../core/bench/figures';
import { runRolloutsInProcess, timeStoreWrites, withScratchRun, writeScaledWorld, type ScratchRun } from '../../core/bench/in-process';
import { parseRunConfig, type RunConfig, type RunConfigInput } from '../../core/config';
import { createEnvironment } from '../../core/envs/registry';
import { loadSimWorld } from '../../core/envs/sim/world';
import type { RunStore } from '../../core/store/run-store';
import type { SimCluster } from '../../sim-cluster/server';
import { readLatency, resetLatency, startBenchCluster } from './sim-latency';
import { benchRunId, releaseRun, runHistory, startBenchRun, stepsWallSeconds, waitForStepClosed, waitUntilHeld } from './temporal-runs';

/** Activity slots of a rollout worker (workers/worker.ts): groups at once, in-process as on Temporal. */
export const ROLLOUT_SLOTS = 64;

export interface OverheadSize {
  tasks: number;
  groupSize: number;
}

export interface BenchPlan {
  /** (a): one step of tasks x G rollouts each, measured `repeats` times. */
  sizes: OverheadSize[];
  repeats: number;
  /** (b): latency profiles, staleness bounds k, steps per run, simulated seconds per real second. */
  profiles: string[];
  staleness: number[];
  steps: number;
  speedup: number;
}

export interface BenchOptions extends BenchPlan {
  client: Client;
  store: RunStore;
  /** The runs' config of (b), sim-transfer shaped; (a) takes its rollout settings. */
  rowConfig: RunConfigInput;
  /** Scratch: the scaled world file, the sim clusters' state. */
  dataDir: string;
  /** The sim clusters' logger. */
  logger: Logger;
  /** Progress lines. */
  log: (line: string) => void;
}

/** How (c) labels the runs of (b), to tell them from the overhead runs. */
const ROW_LABEL = 'row ';

/** (a), (b) and (c) in one go, in that order; one sim cluster per latency profile, all closed at the end. */
export async function runBench(options: BenchOptions): Promise<BenchResult> {
  const { log } = options;
  mkdirSync(options.dataDir, { recursive: true });
  const heldOut = parseRunConfig(options.rowConfig).eval.heldOut;
  const maxTasks = Math.max(...options.sizes.map((s) => s.tasks));
  const worldFile = path.resolve(options.dataDir, 'world-bench.json');
  const scaledWorld = writeScaledWorld(loadSimWorld(), maxTasks, heldOut, worldFile);
  const clusters: SimCluster[] = [];
  const histories: RunHistory[] = [];
  try {
    const zero = await startBenchCluster({ world: scaledWorld, dataDir: options.dataDir, logger: options.logger });
    clusters.push(zero);
    log(
      `[SIMULATED] zero-latency sim cluster at ${zero.url} (world with ${scaledWorld.kinds.map((k) => k.tasks).join('/')} tasks per kind)`,
    );
    const overheadBySize: OverheadFigures[] = [];
    for (const [i, size] of options.sizes.entries()) {
      const { figures, history } = await measureOverhead(options, size, zero.url, worldFile, i === 0);
      overheadBySize.push(figures);
      histories.push(history);
    }
    const rows: BenchRow[] = [];
    for (const profile of options.profiles) {
      const cluster = await startBenchCluster({
        world: loadSimWorld(),
        dataDir: options.dataDir,
        logger: options.logger,
        latency: { profile, speedup: options.speedup },
      });
      clusters.push(cluster);
      log(`[SIMULATED] sim cluster with latency profile '${profile}' (speedup ${options.speedup}x) at ${cluster.url}`);
      for (const k of options.staleness) {
        const { row, history } = await measureRow(options, profile, k, cluster.url);
        rows.push(row);
        histories.push(history);
      }
    }
    return {
      overhead: overheadBySize[0],
      overheadBySize,
      rows,
      history: historyFigures(histories, ROW_LABEL),
      machine: { cpus: os.cpus().length, node: process.versions.node },
    };
  } finally {
    for (const cluster of clusters) {
      await cluster.close().catch(() => undefined);
      rmSync(cluster.store.dataDir, { recursive: true, force: true });
    }
  }
}

/** The config of an overhead run: the row config's rollouts, one step of tasks x G, rescue, evaluation and re-anchoring off. */
function overheadConfig(options: BenchOptions, size: OverheadSize, simUrl: string, world: string): RunConfigInput {
  const c = options.rowConfig;
  return {
    ...c,
    name: `bench-overhead-${size.tasks * size.groupSize}`,
    env: { kind: 'sim', world },
    steps: 1,
    policy: { ...c.policy, baseUrl: `${simUrl}/v1` },
    trainer: { ...c.trainer, baseUrl: simUrl },
    rollout: { ...c.rollout, tasksPerStep: size.tasks, groupSize: size.groupSize },
    rescue: { ...c.rescue, enabled: false },
    router: { ...c.router, probeTasksPerKind: 1, probeRollouts: 1, reanchorEvery: 0 },
    eval: { ...c.eval, enabled: false },
    pipeline: { maxStaleness: 0 },
  };
}

/**
 * (a) `repeats` times, interleaved: one step of tasks x G base rollouts
 * through the workflow (its rollout phase from the step summary; every run
 * has the same seed, so the same rollouts), then the same rollouts in
 * process against the same sim cluster, without and with their run-store
 * writes, then those writes alone. With `warmUp`, one round more first, not counted.
 */
async function measureOverhead(options: BenchOptions, size: OverheadSize, simUrl: string, world: string, warmUp: boolean) {
  const { client, store, log } = options;
  const rollouts = size.tasks * size.groupSize;
  const raw = overheadConfig(options, size, simUrl, world);
  const config = parseRunConfig(raw, 'bench overhead config');
  const env = createEnvironment(config.env);
  const m = {
    inProcessMs: [] as number[],
    inProcessWithStoreMs: [] as number[],
    storeWritesAloneMs: [] as number[],
    phaseSeconds: [] as StepPhases[],
    runIds: [] as string[],
  };
  try {
    // Round 0 warms up (the first run on a fresh stack is slow everywhere) and is not counted.
    for (let r = warmUp ? 0 : 1; r <= options.repeats; r++) {
      const round = r === 0 ? 'warm-up' : `${r}/${options.repeats}`;
      const runId = benchRunId(`overhead-${rollouts}`);
      log(`(a) ${rollouts} rollouts (${size.tasks} tasks x G=${size.groupSize}), ${round}: as Temporal activities, run ${runId}`);
      const summary = await overheadRun(options, runId, raw, config, rollouts);
      const inProcess = (storeIn?: ScratchRun) =>
        runRolloutsInProcess({ config, env, step: 0, policyVersion: summary.policyVersionBefore, groupsAtOnce: ROLLOUT_SLOTS, storeIn });
      log(`(a) ${rollouts} rollouts, ${round}: in process, without and with their run-store writes, then the writes alone`);
      const bare = await inProcess();
      if (r === 0) continue;
      m.phaseSeconds.push(summary.phaseSeconds);
      m.runIds.push(runId);
      m.inProcessMs.push(bare.ms);
      m.inProcessWithStoreMs.push((await withScratchRun(store, 'rollouts', inProcess)).ms);
      m.storeWritesAloneMs.push(
        await withScratchRun(store, 'writes', (scratch) =>
          timeStoreWrites(scratch, bare.trajectories, config.rollout.concurrency, ROLLOUT_SLOTS),
        ),
      );
    }
  } finally {
    await env.close?.();
  }
  const figures = overheadFigures({
    tasks: size.tasks,
    groupSize: size.groupSize,
    concurrency: config.rollout.concurrency,
    groupsAtOnce: ROLLOUT_SLOTS,
    ...m,
  });
  log(
    `(a) ${rollouts} rollouts: in-process ${figures.inProcessMsPerRollout.toFixed(2)} ms, Temporal ${figures.temporalMsPerRollout.toFixed(2)} ms per rollout`,
  );
  return { figures, history: await runHistory(client, `overhead ${rollouts}`, m.runIds[0], 1) };
}

type StepPhases = { rollout: number; train: number; publish: number };

/** One overhead run to its end; its one step's summary, checked to hold exactly the rollouts asked for. */
async function overheadRun(options: BenchOptions, runId: string, raw: RunConfigInput, config: RunConfig, rollouts: number) {
  await (await startBenchRun(options.client, runId, raw, config, false)).result();
  const [step] = await options.store.steps(runId);
  const phaseSeconds = step?.summary.phaseSeconds;
  if (!phaseSeconds) throw new Error(`bench run ${runId} recorded no timed step`);
  if (step.summary.baseRollouts !== rollouts) throw new Error(`bench run ${runId}: ${step.summary.baseRollouts} rollouts, not ${rollouts}`);
  return { phaseSeconds, policyVersionBefore: step.summary.policyVersionBefore };
}

/** The config of a row: the row config with this cluster, these steps and k; evaluation and re-anchoring off (the window holds steps only). */
function rowConfig(options: BenchOptions, profile: string, k: number, simUrl: string): RunConfigInput {
  const c = options.rowConfig;
  return {
    ...c,
    name: `bench-${profile}-k${k}`,
    steps: options.steps,
    policy: { ...c.policy, baseUrl: `${simUrl}/v1` },
    trainer: { ...c.trainer, baseUrl: simUrl },
    router: { ...c.router, reanchorEvery: 0 },
    eval: { ...c.eval, enabled: false },
    pipeline: { ...c.pipeline, maxStaleness: k },
  };
}

/**
 * (b) A run of a few steps on a latency profile's cluster: held before step 0
 * until its profiling is done, the latency accounting reset, released; the
 * accounting read as its last step ends.
 */
async function measureRow(
  options: BenchOptions,
  profile: string,
  k: number,
  simUrl: string,
): Promise<{ row: BenchRow; history: RunHistory }> {
  const { client, store, log, steps } = options;
  const raw = rowConfig(options, profile, k, simUrl);
  const config: RunConfig = parseRunConfig(raw, 'bench row config');
  const runId = benchRunId(`${profile}-k${k}`);
  log(`(b) ${profile}, k=${k}${k === 0 ? ' (sync)' : ''}: run ${runId}, profiling first`);
  const handle = await startBenchRun(client, runId, raw, config, true);
  const result = handle.result();
  result.catch(() => undefined);
  await waitUntilHeld(handle, result);
  await resetLatency(simUrl);
  await releaseRun(handle);
  log(`(b) ${profile}, k=${k}: ${steps} steps`);
  await waitForStepClosed(client, runId, steps - 1, result);
  const latency = await readLatency(simUrl);
  await result;
  const summaries = (await store.steps(runId)).map((s) => s.summary);
  const row = rowFigures({
    profile,
    maxStaleness: k,
    runId,
    steps: summaries,
    wallWindowSeconds: await stepsWallSeconds(client, runId, steps),
    latency,
  });
  log(
    `(b) ${profile}, k=${k}: ${row.stepSeconds.toFixed(1)} ${row.simulated ? 'SIMULATED' : 'wall'} s per step, ${row.rolloutsPerSecond.toFixed(2)} rollouts/s`,
  );
  return { row, history: await runHistory(client, `${ROW_LABEL}${profile} k=${k}`, runId, steps) };
}

/** The standard bench, or `--quick`'s subset; profiles, steps and speedup as given. */
export function benchPlan(options: {
  quick?: boolean;
  profiles?: string[];
  steps?: number;
  speedup?: number;
  allProfiles: string[];
}): BenchPlan {
  const quick = options.quick === true;
  return {
    sizes: quick
      ? [{ tasks: 64, groupSize: 8 }]
      : [
          { tasks: 64, groupSize: 8 },
          { tasks: 512, groupSize: 8 },
        ],
    repeats: quick ? 2 : 3,
    profiles: options.profiles ?? (quick ? ['balanced'] : options.allProfiles),
    staleness: quick ? [0, 1] : [0, 1, 2],
    steps: options.steps ?? (quick ? 3 : 4),
    speedup: options.speedup ?? 30,
  };
}
