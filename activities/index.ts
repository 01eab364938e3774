/**
 * Activities: thin Temporal adapters over core/. Built by a factory over their
 * dependencies, so tests and workers pass in what they need. Each one is
 * idempotent: it reads what the store already has before doing any work.
 */
import { ApplicationFailure, CancelledFailure, Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { parseRunConfig, RunConfigError, type RunConfig } from '../core/config';
import type { Environment, TaskRef } from '../core/envs/environment';
import { SimWorldError } from '../core/envs/sim/world';
import { runEpisode } from '../core/harness/runtime';
import { PolicyClient, PolicyResponseError } from '../core/policy/client';
import { publishAdapter, PublishError, type PublishResult } from '../core/policy/publisher';
import { adapterDirFromEnv, resolveSamplerWeights, SamplerWeightsError } from '../core/policy/sampler-weights';
import type { TrainerSessions } from '../core/rl/tinker/sessions';
import type { GroupSummary } from '../core/rl/groups';
import { summarizeRunSteps, type RunSummary, type StepSummary } from '../core/rl/step-summary';
import { hashSeed } from '../core/random';
import { sampleTasks as drawTasks, splitTasks } from '../core/rl/task-sampling';
import type { EvaluationSummary } from '../core/rl/evaluation';
import { buildProfiles, profileShift, type ProbeOutcome } from '../core/router/profiles';
import { rank1Routes } from '../core/router/rank1';
import { routeDeadGroup, type RoutingDecision } from '../core/router/router';
import type { DeadGroup } from '../core/router/validation';
import { RunIdInUseError, type RunStore } from '../core/store/run-store';
import { APIError } from 'openai';
import { HarnessSpecError } from '../core/harness/spec';
import { DbBenchTaskFileError } from '../core/envs/dbbench/tasks';
import { CharsetTaskFileError } from '../core/envs/charset/environment';
import { apiKeyOf, MissingSecretError } from '../core/secrets';
import { mapWithConcurrency } from '../core/concurrency';
import { withHeartbeatClock } from './heartbeat';
import { asTrainerFailure, createTrainStep, trainerClient } from './train-step';

/** How long a finished run waits for its trainer model to be unloaded. */
const UNLOAD_TIMEOUT_MS = 20_000;

export interface ActivityDeps {
  store: RunStore;
  logger: Logger;
  /** The environment a run's config names (callers cache as they see fit). */
  environmentFor(config: RunConfig): Environment;
  /** This worker process's Tinker sessions, kept alive while it lives. */
  trainerSessions: TrainerSessions;
  /** Where sampler weights are unpacked for the inference servers (they must see it at the same path). */
  adapterDir?: string;
}

/** Stored configs are complete (parsed with defaults), so `eval` is absent only from runs stored before it existed. */
function isFromBeforeEvaluation(storedConfig: unknown): boolean {
  return typeof storedConfig === 'object' && storedConfig !== null && !('eval' in storedConfig);
}

/** Errors a user must fix: retrying cannot help, so the workflow fails at once with the message. */
function asNonRetryable(err: unknown): never {
  if (
    err instanceof RunConfigError || err instanceof SimWorldError || err instanceof PolicyResponseError ||
    err instanceof HarnessSpecError || err instanceof DbBenchTaskFileError || err instanceof CharsetTaskFileError || err instanceof RunIdInUseError ||
    err instanceof MissingSecretError
  ) {
    throw ApplicationFailure.nonRetryable(err.message, err.name);
  }
  // The endpoint refused the request itself (bad model or adapter name, bad key): retrying cannot help.
  if (err instanceof APIError && err.status !== undefined && [400, 401, 403, 404, 422].includes(err.status)) {
    throw ApplicationFailure.nonRetryable(`policy endpoint: HTTP ${err.status}: ${err.message}`, 'PolicyRequestRefused');
  }
  throw err;
}

export function createActivities(deps: ActivityDeps) {
  const { store, logger } = deps;

  async function loadRun(runId: string): Promise<{ config: RunConfig; env: Environment }> {
    const run = await store.getRun(runId);
    if (!run) throw ApplicationFailure.nonRetryable(`run ${runId} is not registered in the run store`, 'UnknownRun');
    try {
      const config = parseRunConfig(run.config, `stored config of run ${runId}`);
      // A run begun before evaluation existed keeps training on every task and does not evaluate.
      if (isFromBeforeEvaluation(run.config)) config.eval = { ...config.eval, enabled: false, heldOut: 0 };
      return { config, env: deps.environmentFor(config) };
    } catch (err) {
      return asNonRetryable(err);
    }
  }

  /**
   * Frees a finished run's trainer model, best effort and briefly: the run is
   * done whatever the trainer answers, so no failure or slow trainer fails
   * the summary; a model left behind is logged.
   */
  async function unloadTrainerModel(config: RunConfig, runId: string, modelId: string): Promise<void> {
    try {
      const signal = AbortSignal.any([Context.current().cancellationSignal, AbortSignal.timeout(UNLOAD_TIMEOUT_MS)]);
      await trainerClient(config, signal).unloadModel(modelId);
      logger.info({ runId, modelId }, 'trainer model unloaded: the run is done');
    } catch (err) {
      logger.warn({ runId, modelId, err: (err as Error).message }, 'could not unload the trainer model; the run is done either way');
    }
  }

  /**
   * Makes a trainer step's weights servable on every inference server: its sampler weights unpacked
   * to a local directory, loaded as LoRA adapter `policyVersion`, checked against the trainer's probe.
   */
  async function publishEverywhere(runId: string, step: number, policyVersion: string, samplerPath: string): Promise<PublishSummary> {
    const { config } = await loadRun(runId);
    const servers = config.policy.inferenceServers.length ? config.policy.inferenceServers : [config.policy.baseUrl];
    const signal = Context.current().cancellationSignal;
    const probe = (await store.trainerStep(runId, step))?.probe ?? null;
    let phase = 'unpacking the sampler weights';
    try {
      return await withHeartbeatClock(
        () => ({ step, phase }),
        async () => {
          const adapterDir = await resolveSamplerWeights({
            samplerPath,
            trainer: trainerClient(config, signal),
            checkpointsDir: config.trainer.checkpointsDir,
            adapterDir: deps.adapterDir ?? adapterDirFromEnv(),
          });
          const results: PublishResult[] = [];
          for (const server of servers) {
            phase = `loading on ${server}`;
            results.push(
              await publishAdapter({ server, apiKey: apiKeyOf(config.policy, 'policy'), adapterName: policyVersion, adapterDir, probe, tolerance: config.policy.probeTolerance, signal }),
            );
          }
          const diffs = results.flatMap((r) => (r.probeMeanAbsDiff === null ? [] : [r.probeMeanAbsDiff]));
          logger.info({ runId, step, policyVersion, servers: results }, 'policy published');
          return { servers: results.length, probeMeanAbsDiff: diffs.length ? Math.max(...diffs) : null, reloaded: results.filter((r) => r.reloaded).length };
        },
      );
    } catch (err) {
      if (err instanceof MissingSecretError) throw ApplicationFailure.nonRetryable(err.message, err.name);
      if ((err instanceof PublishError || err instanceof SamplerWeightsError) && !err.retryable) throw ApplicationFailure.nonRetryable(err.message, err.name);
      return asTrainerFailure(err);
    }
  }

  function harnessPool(config: RunConfig, env: Environment) {
    const all = env.harnesses();
    if (config.harnessPool.length === 0) return all;
    return config.harnessPool.map((id, i) => {
      const harness = all.find((h) => h.id === id);
      if (!harness) {
        // Non-retryable wherever it is called from: the pool is what the config names.
        throw ApplicationFailure.nonRetryable(
          `run config is invalid:\n  - harnessPool.${i}: env '${env.id}' has no harness '${id}' (it has: ${all.map((h) => h.id).join(', ')})`,
          'RunConfigError',
        );
      }
      return harness;
    });
  }

  return {
    /** Validates the config (every bad field named), registers the run, describes its harness pool. */
    async prepareRun(input: { runId: string; config: unknown; incarnation: string; continuing: boolean }) {
      try {
        const config = parseRunConfig(input.config);
        if (input.continuing && isFromBeforeEvaluation((await store.getRun(input.runId))?.config)) {
          // Continuing a run begun before evaluation existed: it keeps what it began with, for good.
          config.eval = { ...config.eval, enabled: false, heldOut: 0 };
        }
        const env = deps.environmentFor(config);
        const pool = harnessPool(config, env);
        const base = pool.filter((h) => h.direction === 'base');
        if (base.length !== 1) {
          throw new RunConfigError(`run config is invalid:\n  - harnessPool: needs exactly one base harness, found ${base.length}`, ['harnessPool']);
        }
        if (config.rescue.enabled && pool.length < 2) {
          throw new RunConfigError('run config is invalid:\n  - rescue.enabled: the harness pool has no sibling to rescue with; add siblings or set rescue.enabled to false', ['rescue.enabled']);
        }
        await store.registerRun({ runId: input.runId, name: config.name, env: config.env.kind, config, incarnation: input.incarnation, takeOver: input.continuing });
        logger.info({ runId: input.runId, env: config.env.kind, harnesses: pool.map((h) => h.id) }, 'run prepared');
        return {
          config,
          baseHarnessId: base[0].id,
          harnessIds: pool.map((h) => h.id),
          simulated: config.env.kind === 'sim',
        };
      } catch (err) {
        return asNonRetryable(err);
      }
    },

    /**
     * The tasks of a training step (B, from seed and step) or of a probe pass
     * (per kind), both from the training split; or the eval tasks (per kind, a
     * fixed draw from the held-out split, the same for every run).
     */
    async sampleTasks(input: { runId: string; purpose: 'train' | 'probe' | 'eval'; step: number }): Promise<TaskRef[]> {
      const { config, env } = await loadRun(input.runId);
      const split = splitTasks(env.listTasks(), config.eval.heldOut);
      if (input.purpose === 'train') return drawTasks(split.train, config.rollout.tasksPerStep, config.seed, input.step);
      const [pool, perKind, seedOf] =
        input.purpose === 'probe'
          ? [split.train, config.router.probeTasksPerKind, (kind: string) => hashSeed('probe', config.seed, kind)]
          : [split.eval, config.eval.tasksPerKind, (kind: string) => hashSeed('eval', kind)];
      const kinds = [...new Set(pool.map((t) => t.kind))];
      return kinds.flatMap((kind) => drawTasks(pool.filter((t) => t.kind === kind), perKind, seedOf(kind), input.step));
    },

    /** Task refs (id and kind) for task ids, e.g. recent dead groups to probe. */
    async describeTasks(input: { runId: string; taskIds: string[] }): Promise<TaskRef[]> {
      const { env } = await loadRun(input.runId);
      const byId = new Map(env.listTasks().map((t) => [t.taskId, t]));
      return input.taskIds.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
    },

    /**
     * One rollout group of one task: for each (harness, sample) of the plan, a
     * rollout, stored as soon as it ends. Rollouts already stored are not redone.
     */
    async runRolloutGroup(input: {
      runId: string;
      phase: string;
      step: number;
      taskId: string;
      role: 'base' | 'rescue' | 'probe' | 'eval';
      policyVersion: string;
      plan: Array<{ harnessId: string; samples: number }>;
    }): Promise<GroupSummary> {
      const { config, env } = await loadRun(input.runId);
      const pool = harnessPool(config, env);
      const harnessIds = input.plan.map((p) => p.harnessId);
      const stored = await store.rolloutSummaries(input.runId, input.phase, input.step, input.taskId, harnessIds);
      const have = new Set(stored.map((r) => `${r.harnessId}/${r.sample}`));
      const todo = input.plan.flatMap((p) =>
        Array.from({ length: p.samples }, (_, sample) => ({ harnessId: p.harnessId, sample })).filter((r) => !have.has(`${r.harnessId}/${r.sample}`)),
      );
      let policy: PolicyClient;
      try {
        policy = new PolicyClient({ ...config.policy, apiKey: apiKeyOf(config.policy, 'policy') });
      } catch (err) {
        return asNonRetryable(err);
      }
      const task = env.listTasks().find((t) => t.taskId === input.taskId);
      if (!task) throw ApplicationFailure.nonRetryable(`env ${env.id} has no task ${input.taskId}`, 'UnknownTask');
      let completed = stored.length;
      const log = logger.child({ runId: input.runId, step: input.step, taskId: input.taskId, role: input.role });
      // Heartbeat on a clock, not per rollout: one episode against a real endpoint can outlast the heartbeat timeout.
      const context = Context.current();
      try {
        await withHeartbeatClock(
          () => ({ completed }),
          () =>
            mapWithConcurrency(todo, config.rollout.concurrency, async ({ harnessId, sample }) => {
              const harness = pool.find((h) => h.id === harnessId);
              if (!harness) throw ApplicationFailure.nonRetryable(`harness ${harnessId} is not in this run's pool`, 'UnknownHarness');
              const trajectory = await runEpisode({
                env, harness, policy, model: input.policyVersion, taskId: input.taskId, sample,
                maxTurns: config.rollout.maxTurns, maxTokens: config.rollout.maxTokens, temperature: config.policy.temperature,
                seed: hashSeed(config.seed, input.phase, input.step, input.taskId, harnessId, sample),
              });
              await store.insertTrajectories(input.runId, input.phase, input.step, input.role, [trajectory]);
              completed += 1;
              context.heartbeat({ completed });
            }, context.cancellationSignal),
        );
      } catch (err) {
        return asNonRetryable(err);
      }
      const rollouts = await store.rolloutSummaries(input.runId, input.phase, input.step, input.taskId, harnessIds);
      log.debug({ rollouts: rollouts.length, reused: stored.length }, 'rollout group done');
      return { taskId: task.taskId, kind: task.kind, role: input.role === 'rescue' ? 'rescue' : 'base', rollouts };
    },

    /**
     * The router: which k siblings retry a dead group, by the run's strategy.
     * The decision is recorded; a retry returns the recorded one, so voters
     * that answer differently the second time change nothing.
     */
    async chooseRescueHarnesses(input: { runId: string; step: number; profileVersion: number; group: DeadGroup }): Promise<RoutingDecision> {
      const recorded = await store.routingDecision(input.runId, input.step, input.group.taskId);
      if (recorded) return recorded;
      const { config, env } = await loadRun(input.runId);
      const profiles = await store.profiles(input.runId, input.profileVersion);
      if (!profiles) throw ApplicationFailure.nonRetryable(`run ${input.runId} has no profile version ${input.profileVersion}`, 'MissingProfiles');
      const siblings = harnessPool(config, env).filter((h) => h.direction !== 'base');
      const log = logger.child({ runId: input.runId, step: input.step, taskId: input.group.taskId });
      const context = Context.current();
      const decision = await routeDeadGroup({
        strategy: config.router.strategy, profiles, group: input.group, k: config.rescue.k, groupSize: config.rollout.groupSize,
        siblings: siblings.map((h) => ({ id: h.id, direction: h.direction, description: h.description })),
        seed: config.seed, step: input.step, voters: config.router.voters,
        taskText: config.router.strategy === 'vote' ? env.describeTask(input.group.taskId) : '',
        signal: context.cancellationSignal,
      });
      // Cancelled (e.g. the worker is shutting down): voters cut short say nothing about the task; record nothing.
      if (context.cancellationSignal.aborted) throw new CancelledFailure('routing cancelled before the voters answered');
      for (const vote of decision.votes) {
        if (!vote.ok) log.warn({ voter: vote.voter, reason: vote.reason }, 'voter dropped for this decision');
      }
      if (decision.fallback) log.warn({ voters: decision.votes.length }, 'no voter answered usably; the validation rule decided');
      log.info({ strategy: decision.strategy, chosen: decision.chosen, profileVersion: decision.profileVersion }, 'rescue routed');
      return store.recordRoutingDecision(input.runId, input.step, decision);
    },

    /** Rank-1 routing for evaluation: task kind -> the pool's best harness by the given profiles. */
    async rank1Routes(input: { runId: string; profileVersion: number }): Promise<Record<string, string>> {
      const { config, env } = await loadRun(input.runId);
      const profiles = await store.profiles(input.runId, input.profileVersion);
      if (!profiles) throw ApplicationFailure.nonRetryable(`run ${input.runId} has no profile version ${input.profileVersion}`, 'MissingProfiles');
      const pool = harnessPool(config, env);
      const base = pool.find((h) => h.direction === 'base')!.id;
      const kinds = [...new Set(env.listTasks().map((t) => t.kind))].sort();
      return rank1Routes(profiles, pool.map((h) => h.id), base, kinds);
    },

    /** Stores a run's changed config and from which step it applies, so every activity after it reads the new one. */
    async updateRunConfig(input: { runId: string; fromStep: number; config: RunConfig }): Promise<void> {
      await store.updateRunConfig(input.runId, input.fromStep, input.config);
      logger.info({ runId: input.runId, fromStep: input.fromStep }, 'run config changed');
    },

    async recordEvaluation(input: { runId: string; summary: EvaluationSummary }): Promise<void> {
      await store.recordEvaluation(input.runId, input.summary);
      logger.info(
        { runId: input.runId, afterSteps: input.summary.afterSteps, base: input.summary.base.successRate, rank1: input.summary.rank1.successRate },
        'evaluation recorded',
      );
    },

    /** Builds a profile version from a probe pass's stored rollouts. */
    async saveProfiles(input: { runId: string; phase: string; version: number; policyVersion: string; taskIds: string[]; fixedTaskIds?: string[] }) {
      const fixed = new Set(input.fixedTaskIds ?? input.taskIds);
      const { config, env } = await loadRun(input.runId);
      const pool = harnessPool(config, env);
      const base = pool.find((h) => h.direction === 'base')!;
      const tasks = env.listTasks();
      const outcomes: ProbeOutcome[] = [];
      for (const taskId of input.taskIds) {
        const rollouts = await store.rolloutSummaries(input.runId, input.phase, 0, taskId, pool.map((h) => h.id));
        const siblings: ProbeOutcome['siblings'] = {};
        for (const r of rollouts) {
          if (r.harnessId === base.id) continue;
          (siblings[r.harnessId] ??= []).push({ success: r.success, turns: r.turns, tokens: r.tokens });
        }
        outcomes.push({
          taskId,
          kind: tasks.find((t) => t.taskId === taskId)?.kind ?? 'unknown',
          baseHarnessId: base.id,
          fixedSample: fixed.has(taskId),
          base: rollouts.filter((r) => r.harnessId === base.id),
          siblings,
        });
      }
      const profiles = buildProfiles(outcomes, {
        version: input.version,
        policyVersion: input.policyVersion,
        priorStrength: config.router.priorStrength,
      });
      await store.saveProfiles(input.runId, profiles);
      const previous = input.version > 1 ? await store.profiles(input.runId, input.version - 1) : null;
      return { version: profiles.version, cells: profiles.cells.length, shift: previous ? profileShift(previous, profiles) : null };
    },

    trainStep: createTrainStep({ store, logger, loadRun, trainerSessions: deps.trainerSessions }),

    /** Makes a policy version servable on every inference server (vLLM runtime LoRA loading), checked by the probe. */
    async publishPolicy(input: { runId: string; step: number; policyVersion: string; samplerPath: string }): Promise<PublishSummary> {
      return publishEverywhere(input.runId, input.step, input.policyVersion, input.samplerPath);
    },

    /** On resume: inference servers may have restarted and lost their runtime LoRA adapters; load the current one again. */
    async republishPolicy(input: { runId: string; step: number }): Promise<void> {
      const trained = await store.trainerStep(input.runId, input.step);
      if (trained) await publishEverywhere(input.runId, input.step, trained.policyVersion, trained.samplerPath);
    },

    async recordStep(input: { runId: string; summary: StepSummary }): Promise<void> {
      await store.settleRoutingDecisions(input.runId, input.summary.step);
      await store.recordStep(input.runId, input.summary.step, input.summary.policyVersion, input.summary);
      logger.info({ runId: input.runId, step: input.summary.step, baseSuccess: input.summary.baseSuccessRate }, 'step recorded');
    },

    /** The run's summary; a run that has done all its steps also frees its trainer model (its sampler checkpoints stay). */
    async summarizeRun(input: { runId: string }): Promise<RunSummary> {
      const { config } = await loadRun(input.runId);
      const steps = await store.steps(input.runId);
      const summary = summarizeRunSteps(
        { runId: input.runId, name: config.name, simulated: config.env.kind === 'sim', basePolicy: config.policy.model },
        steps.map((s) => s.summary as StepSummary),
        await store.evaluations(input.runId),
      );
      const modelId = (await store.getRun(input.runId))?.trainerModelId;
      if (modelId && summary.stepsCompleted >= config.steps) await unloadTrainerModel(config, input.runId, modelId);
      return summary;
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;

/** What publishing a policy version did, small enough for the step summary. */
export interface PublishSummary {
  servers: number;
  /** The largest mean |Δ| log-prob between a server's answer to the probe and the trainer's; null without a probe. */
  probeMeanAbsDiff: number | null;
  /** Servers that had the adapter name with other weights and loaded the step's in place. */
  reloaded: number;
}
