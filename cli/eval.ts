/**
 * `harness-s eval`: any OpenAI-compatible endpoint under one harness, over an
 * env's tasks, with a progress bar; every trajectory stored in PostgreSQL.
 */
import { SingleBar, Presets } from 'cli-progress';
import type { Environment } from '../core/harness/environment';
import type { Harness } from '../core/harness/harness';
import { runEpisode } from '../core/harness/runtime';
import { PolicyClient } from '../core/policy/client';
import type { Trajectory } from '../core/policy/trajectory';
import { hashSeed } from '../core/random';
import type { RunStore } from '../core/store/run-store';
import { mapWithConcurrency } from '../core/concurrency';
import { UserError } from '../core/errors';
import { wilsonInterval } from '../core/stats';
import { harnessById } from '../core/envs/registry';
import { rank1Routes } from '../core/router/rank1';
import type { BehaviorProfiles } from '../core/router/profiles';

export interface EvalOptions {
  evalId: string;
  env: Environment;
  envConfig: unknown;
  harness: Harness;
  /** Rank-1 routing: the harness of each task kind (kinds not listed run `harness`). */
  routes?: Record<string, Harness>;
  baseUrl: string;
  model: string;
  apiKey: string;
  limit?: number;
  /** Only these tasks (each must exist). */
  taskIds?: string[];
  concurrency: number;
  maxTurns: number;
  /** Episodes per task (1: one each), each with its own seed. */
  samples?: number;
  /** Tokens per reply at most (the server's limit when unset). */
  maxTokens?: number;
  temperature: number;
  seed: number;
  store: RunStore;
  /** Show a progress bar on stderr. */
  progress: boolean;
}

export interface EvalResult {
  evalId: string;
  harness: string;
  model: string;
  total: number;
  passed: number;
  /** Wilson's 95% interval of the success rate. */
  interval95: { lo: number; hi: number };
  byKind: Record<string, { total: number; passed: number }>;
  failures: Record<string, number>;
  trajectories: Trajectory[];
}

export async function evaluate(options: EvalOptions): Promise<EvalResult> {
  const { env, harness, store } = options;
  const all = env.listTasks();
  if (options.taskIds && options.taskIds.length === 0) throw new UserError('--tasks: give at least one task id (comma-separated)');
  const unknown = (options.taskIds ?? []).filter((id) => !all.some((t) => t.taskId === id));
  if (unknown.length)
    throw new UserError(
      `--tasks: env ${env.id} has no task ${unknown.join(', ')} (it has ${all
        .slice(0, 5)
        .map((t) => t.taskId)
        .join(', ')}${all.length > 5 ? ', ...' : ''})`,
    );
  const tasks = (options.taskIds ? all.filter((t) => options.taskIds!.includes(t.taskId)) : all).slice(0, options.limit ?? undefined);
  await store.registerRun({
    runId: options.evalId,
    name: options.evalId,
    env: env.id,
    config: {
      kind: 'eval',
      env: options.envConfig,
      harness: options.routes ? 'rank1' : harness.id,
      routes: options.routes ? Object.fromEntries(Object.entries(options.routes).map(([kind, h]) => [kind, h.id])) : undefined,
      harnessVersion: harness.version ?? null,
      model: options.model,
      baseUrl: options.baseUrl,
    },
    incarnation: options.evalId,
    takeOver: false,
  });
  // Evaluation does not train: an endpoint without token ids (a hosted API) is fine here.
  const policy = new PolicyClient({ baseUrl: options.baseUrl, apiKey: options.apiKey, requestTimeoutSeconds: 120, requireTokens: false });
  const bar = options.progress
    ? new SingleBar(
        { format: ' eval [{bar}] {value}/{total} episodes | {passed} passed | ETA {eta}s', stream: process.stderr },
        Presets.shades_classic,
      )
    : null;
  let passed = 0;
  const samples = options.samples ?? 1;
  const episodes = tasks.flatMap((task) => Array.from({ length: samples }, (_, sample) => ({ task, sample })));
  bar?.start(episodes.length, 0, { passed });
  const trajectories: Trajectory[] = [];
  try {
    await mapWithConcurrency(episodes, options.concurrency, async ({ task, sample }) => {
      const trajectory = await runEpisode({
        env,
        harness: options.routes?.[task.kind] ?? harness,
        policy,
        model: options.model,
        taskId: task.taskId,
        sample,
        maxTurns: options.maxTurns,
        temperature: options.temperature,
        maxTokens: options.maxTokens,
        seed: sample === 0 ? hashSeed(options.seed, task.taskId) : hashSeed(options.seed, task.taskId, sample),
      });
      await store.insertTrajectories(options.evalId, 'eval', 0, 'eval', [trajectory]);
      trajectories.push(trajectory);
      if (trajectory.success) passed += 1;
      bar?.increment(1, { passed });
    });
  } finally {
    bar?.stop();
  }
  const byKind: EvalResult['byKind'] = {};
  const failures: EvalResult['failures'] = {};
  for (const t of trajectories) {
    const cell = (byKind[t.taskKind] ??= { total: 0, passed: 0 });
    cell.total += 1;
    cell.passed += t.success ? 1 : 0;
    if (!t.success) failures[t.failureType ?? 'unknown'] = (failures[t.failureType ?? 'unknown'] ?? 0) + 1;
  }
  return {
    evalId: options.evalId,
    harness: options.routes ? 'rank1' : harness.id,
    model: options.model,
    total: trajectories.length,
    passed,
    interval95: wilsonInterval(passed, trajectories.length),
    byKind,
    failures,
    trajectories,
  };
}

/**
 * Each task kind's Rank-1 harness from stored evals (the router's own rule,
 * core/router/rank1.ts: best smoothed success on the kind; on a tie the base
 * harness). Every harness the evals ran must be in the env's pool.
 */
export async function rank1FromEvals(
  store: RunStore,
  env: Environment,
  fallback: Harness,
  evalIds: string,
): Promise<Record<string, Harness>> {
  const ids = evalIds
    .split(',')
    .map((id) => id.trim())
    .filter(Boolean);
  if (ids.length === 0) throw new UserError('--route-from: give at least one eval id (comma-separated)');
  const counts = await store.evalSuccessByKind(ids);
  if (counts.length === 0) throw new UserError(`--route-from: no eval episodes stored for ${ids.join(', ')}`);
  const pool = env.harnesses();
  const unknown = [...new Set(counts.map((c) => c.harnessId))].filter((id) => !pool.some((h) => h.id === id));
  if (unknown.length) throw new UserError(`--route-from: harness ${unknown.join(', ')} is not in env ${env.id}'s pool`);
  const profiles: BehaviorProfiles = {
    version: 0,
    baseHarnessId: pool[0].id,
    policyVersion: 'eval',
    priorStrength: 0,
    cells: [],
    kindCells: counts.map((c) => ({
      harnessId: c.harnessId,
      kind: c.taskKind,
      attempts: c.total,
      successes: c.passed,
      totalTurns: 0,
      rescueAttempts: 0,
      rescueSuccesses: 0,
      rescueTurns: 0,
      rescueTokens: 0,
    })),
  };
  const harnessIds = [...new Set(counts.map((c) => c.harnessId))];
  const kinds = [...new Set(counts.map((c) => c.taskKind))];
  const routes = rank1Routes(profiles, harnessIds, harnessIds.includes(fallback.id) ? fallback.id : pool[0].id, kinds);
  return Object.fromEntries(Object.entries(routes).map(([kind, id]) => [kind, harnessById(env, id)]));
}
