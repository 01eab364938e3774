/**
 * The run's own records: preparing it (config validated, run registered,
 * pool described), config changes, step and evaluation records, and the
 * final summary. Each is idempotent: the store keeps the first record.
 */
import { Context } from '@temporalio/activity';
import { poolHashOfHarnesses } from '../core/harness/frozen-pool';
import { keepPreEvaluationShape, parseRunConfig, parseStoredRunConfig, RunConfigError, type RunConfig } from '../core/config';
import type { EvaluationSummary } from '../core/rl/evaluation';
import { recordStepMetrics, setRunStalled } from '../core/metrics';
import type { RunHealth } from '../core/rl/run-health';
import { type RunSpent, spentOf } from '../core/run-budget';
import { totalSpend, type StepSummary } from '../core/rl/step-summary';
import { summarizeRunSteps, type RunSummary } from '../core/report/run-summary';
import { defaultClients } from './clients';
import type { ActivityDeps, RunContext } from './run-context';
import { envIdOf, fetchFrozenPool } from '../core/envs/registry';
import { isSimulatedEnv } from '../core/sim-kind';
import { type LatencyProfile, modelledGpuSeconds } from '../core/latency-profiles';

/** A sim step's spend with its SIMULATED GPU-seconds under the latency model that runs (none when it is off). */
function withGpuSeconds(summary: StepSummary, profile: LatencyProfile | null): StepSummary {
  if (!profile || !summary.spend) return summary;
  return { ...summary, spend: { ...summary.spend, gpuSeconds: modelledGpuSeconds(profile, summary.spend) } };
}

/** How long a finished run waits for its trainer model to be unloaded. */
const UNLOAD_TIMEOUT_MS = 20_000;

export function createRunActivities(deps: ActivityDeps, context: RunContext) {
  const { store, logger } = deps;
  const clients = deps.clients ?? defaultClients;

  /**
   * Frees a finished run's trainer model, best effort and briefly: the run is
   * done whatever the trainer answers, so no failure or slow trainer fails
   * the summary; a model left behind is logged.
   */
  async function unloadTrainerModel(config: RunConfig, runId: string, modelId: string): Promise<void> {
    try {
      const signal = AbortSignal.any([Context.current().cancellationSignal, AbortSignal.timeout(UNLOAD_TIMEOUT_MS)]);
      await clients.trainer(config, signal).unloadModel(modelId);
      logger.info({ runId, modelId }, 'trainer model unloaded: the run is done');
    } catch (err) {
      logger.warn({ runId, modelId, err: (err as Error).message }, 'could not unload the trainer model; the run is done either way');
    }
  }

  return {
    /** Validates the config (every bad field named), registers the run, describes its harness pool. */
    async prepareRun(input: {
      runId: string;
      config: unknown;
      incarnation: string;
      continuing: boolean;
      fork?: { runId: string; step: number; profileVersion: number | null };
    }) {
      // A continued execution's config was written by this project (perhaps an older version); a new run's by a user.
      let config = input.continuing ? parseStoredRunConfig(input.config, 'run config') : parseRunConfig(input.config);
      // Continuing a run stored by an older version: it keeps what it began with.
      if (input.continuing) config = keepPreEvaluationShape(config, (await store.getRun(input.runId))?.config ?? config);
      await fetchFrozenPool(config.env, store.evolutions);
      const env = deps.environmentFor(config);
      const pool = context.harnessPool(config, env);
      if (config.rescue.enabled && pool.siblings.length === 0) {
        throw new RunConfigError(
          'run config is invalid:\n  - rescue.enabled: the harness pool has no sibling to rescue with; add siblings or set rescue.enabled to false',
          ['rescue.enabled'],
        );
      }
      const poolHash = poolHashOfHarnesses(envIdOf(config.env), env.harnesses());
      await store.registerRun({
        runId: input.runId,
        name: config.name,
        env: envIdOf(config.env),
        config,
        incarnation: input.incarnation,
        takeOver: input.continuing,
        poolHash,
      });
      if (input.fork) {
        // A fork starts from its parent's checkpoint with the parent's behaviour profiles of that time.
        await store.setParent(input.runId, { runId: input.fork.runId, step: input.fork.step });
        if (input.fork.profileVersion !== null) await store.copyProfiles(input.fork.runId, input.runId, input.fork.profileVersion);
      }
      logger.info({ runId: input.runId, env: envIdOf(config.env), harnesses: pool.all.map((h) => h.id), poolHash }, 'run prepared');
      return {
        config,
        poolHash,
        baseHarnessId: pool.base.id,
        harnessIds: pool.all.map((h) => h.id),
        simulated: isSimulatedEnv(config.env.kind),
        /** The run's page in the trajectory viewer, for its Temporal page (null: this worker knows no viewer). */
        viewerRunUrl: deps.viewerUrl ? `${deps.viewerUrl}/runs/${encodeURIComponent(input.runId)}` : null,
      };
    },

    /** Stores a run's changed config and from which step it applies, so every activity after it reads the new one. */
    async updateRunConfig(input: { runId: string; fromStep: number; config: RunConfig }): Promise<void> {
      await store.updateRunConfig(input.runId, input.fromStep, input.config);
      logger.info({ runId: input.runId, fromStep: input.fromStep }, 'run config changed');
    },

    async recordStep(input: { runId: string; summary: StepSummary }): Promise<void> {
      const { config } = await context.loadRun(input.runId);
      const summary = withGpuSeconds(input.summary, isSimulatedEnv(config.env.kind) ? (deps.simLatency ?? null) : null);
      await store.settleRoutingDecisions(input.runId, summary.step);
      const recorded = await store.recordStep(input.runId, summary.step, summary.policyVersion, summary);
      // Counted by the attempt that stored the step, so a retried activity does not count it twice.
      if (recorded) recordStepMetrics((await store.getRun(input.runId))?.env ?? 'unknown', summary);
      logger.info({ runId: input.runId, step: input.summary.step, baseSuccess: input.summary.baseSuccessRate }, 'step recorded');
    },

    /** A run's health changed: the metric and the log say so. */
    async reportRunHealth(input: { runId: string; health: RunHealth }): Promise<void> {
      const { config } = await context.loadRun(input.runId);
      setRunStalled(input.runId, envIdOf(config.env), input.health.state === 'stalled');
      if (input.health.state === 'stalled')
        logger.warn(
          { runId: input.runId, since: input.health.sinceStep, reasons: input.health.reasons },
          'run stalled: it is not learning',
        );
      else logger.info({ runId: input.runId }, 'run learning again');
    },

    /** What a run's steps before `beforeStep` spent, toward its budget (a recovered or forked run starts from it). */
    async runSpent(input: { runId: string; beforeStep: number }): Promise<RunSpent> {
      const steps = (await store.steps(input.runId)).filter((s) => s.step < input.beforeStep).map((s) => s.summary);
      return spentOf(totalSpend(steps));
    },

    async recordEvaluation(input: { runId: string; summary: EvaluationSummary }): Promise<void> {
      await store.recordEvaluation(input.runId, input.summary);
      logger.info(
        {
          runId: input.runId,
          afterSteps: input.summary.afterSteps,
          base: input.summary.base.successRate,
          rank1: input.summary.rank1.successRate,
        },
        'evaluation recorded',
      );
    },

    /**
     * The run's summary, at its end: the run is marked finished (trainer workers stop keeping its
     * session), and a run that has done all its steps also frees its trainer model (its sampler checkpoints stay).
     */
    async summarizeRun(input: { runId: string }): Promise<RunSummary> {
      const { config } = await context.loadRun(input.runId);
      const steps = await store.steps(input.runId);
      const summary = summarizeRunSteps(
        { runId: input.runId, name: config.name, simulated: isSimulatedEnv(config.env.kind), basePolicy: config.policy.model },
        steps.map((s) => s.summary),
        await store.evaluations(input.runId),
      );
      const [first, last] = [steps[0], steps.at(-1)];
      if (first && last)
        summary.trainingSeconds = (last.completedAt.getTime() - first.completedAt.getTime()) / 1000 + first.summary.durationSeconds;
      const modelId = (await store.getRun(input.runId))?.trainerModelId;
      // The last step done is the run's last (a fork's steps start past its parent's checkpoint).
      if (modelId && (steps.at(-1)?.step ?? -1) + 1 >= config.steps) await unloadTrainerModel(config, input.runId, modelId);
      await store.markRunFinished(input.runId);
      return summary;
    },
  };
}
