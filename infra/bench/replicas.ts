/**
 * Rollout throughput over several inference replicas, SIMULATED:
 *   npx tsx infra/bench/replicas.ts [--profile agent-rollout-heavy] [--replicas 1,3] [--steps 2] [--speedup 25]
 *
 * For each replica count, a run of examples/sim-transfer.json's shape
 * (16 tasks x G=8, up to 5 turns) goes through the whole stack (a private
 * Temporal dev server, the run store, in-process workers) against that many
 * SIMULATED inference replicas, each its own sim process part with the
 * profile's per-replica figures (`servers: 1`: one replica each), and a
 * SIMULATED trainer with the same profile. Printed per count: rollout-phase
 * seconds per step and rollouts per simulated second, then the ratio to the
 * first count. A last run restarts one of the replicas in the middle of a
 * step (it forgets its adapters, as vLLM does) and prints how long it took
 * to take requests again. Every second is SIMULATED GPU time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import pino from 'pino';
import type { RunConfigInput } from '../../core/config';
import { loadSimWorld } from '../../core/envs/sim/world';
import { harnessSRun } from '../../workflows';
import { statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { startSimCluster, type SimCluster } from '../../sim-cluster/server';
import { startBenchStack } from './stack';

interface Options {
  profile: string;
  replicas: string;
  steps: number;
  speedup: number;
}

const logger = pino({ level: 'warn' }, pino.destination(2));
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
const world = loadSimWorld();

async function main(): Promise<void> {
  const options = new Command('replicas-bench')
    .option('--profile <name>', 'latency profile', 'agent-rollout-heavy')
    .option('--replicas <list>', 'replica counts to compare', '1,3')
    .option('--steps <n>', 'steps per run', (v) => Number(v), 2)
    .option('--speedup <x>', 'simulated seconds per real second', (v) => Number(v), 25)
    .parse()
    .opts<Options>();
  const counts = options.replicas.split(',').map(Number);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-replica-bench-'));
  const stack = await startBenchStack({ logger, log });
  const latency = { profile: options.profile, speedup: options.speedup };
  const trainer = await startSimCluster({ world, dataDir: mkdtempSync(path.join(dataDir, 'trainer-')), logger, serve: 'trainer', latency });
  const replicas: SimCluster[] = [];
  const startReplica = async (port = 0) =>
    startSimCluster({
      world,
      dataDir: mkdtempSync(path.join(dataDir, 'replica-')),
      logger,
      port,
      serve: 'inference',
      latency: { ...latency, servers: 1 },
    });
  const config = (name: string, servers: string[]): RunConfigInput => ({
    name,
    env: { kind: 'sim' },
    steps: options.steps,
    seed: 1,
    policy: { baseUrl: servers[0], inferenceServers: servers, maxInFlightPerServer: 256 },
    trainer: { baseUrl: trainer.url, pollSeconds: 0.05, adam: { learningRate: 0.2 } },
    rollout: { tasksPerStep: 16, groupSize: 8, maxTurns: 5, concurrency: 8 },
    rescue: { enabled: true, k: 2 },
    router: { probeTasksPerKind: 1, probeRollouts: 2, reanchorEvery: 0 },
    eval: { enabled: false },
  });
  const rows: Array<{ count: number; rolloutSeconds: number[]; rollouts: number[] }> = [];
  try {
    for (const count of counts) {
      while (replicas.length < count) replicas.push(await startReplica());
      const servers = replicas.slice(0, count).map((r) => `${r.url}/v1`);
      const runId = `bench-replicas-${count}-${Date.now()}`;
      log(`${count} replica(s): run ${runId}`);
      await stack.client.workflow.execute(harnessSRun, {
        workflowId: runId,
        taskQueue: TASK_QUEUES.control,
        args: [{ config: config(`replicas-${count}`, servers) }],
      });
      const steps = (await stack.store.steps(runId)).map((s) => s.summary);
      rows.push({
        count,
        rolloutSeconds: steps.map((s) => (s.phaseSeconds?.rollout ?? 0) * options.speedup),
        rollouts: steps.map((s) => s.baseRollouts + s.rescueRollouts),
      });
    }
    const restart = await restartMidStep(stack, replicas, startReplica, config);

    const rate = (r: (typeof rows)[number]) => r.rollouts.reduce((a, b) => a + b, 0) / r.rolloutSeconds.reduce((a, b) => a + b, 0);
    process.stdout.write(
      `[SIMULATED] rollout throughput under latency profile '${options.profile}' (speedup ${options.speedup}), ${options.steps} steps of 16 tasks x G=8:\n`,
    );
    for (const r of rows) {
      process.stdout.write(
        `  ${String(r.count).padStart(2)} replica(s): rollout phase ${r.rolloutSeconds.map((s) => s.toFixed(0)).join(', ')} s per step, ` +
          `${r.rollouts.join(', ')} rollouts, ${rate(r).toFixed(2)} rollouts per simulated second, x${(rate(r) / rate(rows[0])).toFixed(2)} of ${rows[0].count}\n`,
      );
    }
    process.stdout.write(`  a replica restarted mid-step took requests again ${restart.toFixed(1)} s (real) after it answered again\n`);
  } finally {
    for (const r of replicas) await r.close().catch(() => undefined);
    await trainer.close().catch(() => undefined);
    await stack.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** A 3-replica run whose second replica is stopped and started again (no adapters) in step 1's rollouts: real seconds until it serves again. */
async function restartMidStep(
  stack: Awaited<ReturnType<typeof startBenchStack>>,
  replicas: SimCluster[],
  startReplica: (port?: number) => Promise<SimCluster>,
  config: (name: string, servers: string[]) => RunConfigInput,
): Promise<number> {
  while (replicas.length < 3) replicas.push(await startReplica());
  const servers = replicas.slice(0, 3).map((r) => `${r.url}/v1`);
  const runId = `bench-replica-restart-${Date.now()}`;
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: { ...config('replica-restart', servers), steps: 3 } }],
  });
  for (;;) {
    const s = await handle.query(statusQuery);
    const stored = await stack.store.countStepTrajectories(runId, 'train', 1);
    if (s.inFlight?.some((f) => f.step === 1 && f.phase === 'rollouts') && stored > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const port = replicas[1].port;
  await replicas[1].close();
  replicas[1] = await startReplica(port);
  const back = Date.now();
  for (;;) {
    const counts = (await (await fetch(`${replicas[1].url}/sim/requests`)).json()) as { chatCompletions: { total: number } };
    if (counts.chatCompletions.total > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const seconds = (Date.now() - back) / 1000;
  await handle.result();
  return seconds;
}

main().catch((err: unknown) => {
  process.stderr.write(`replicas bench: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
