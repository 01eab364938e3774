/**
 * Publishing a policy version to every inference replica of a run
 * (core/publish/replica-loader.ts), in three activities the step workflow
 * strings together (workflows/publish.ts):
 *
 *   planPublish / planRepublish  (control)  the run's replicas and how each is
 *                                reached; each marked 'pending' for the version
 *   loadPolicyOnReplica          (control with publishVia shared-storage; the
 *                                replica's own queue with replica-workers) one
 *                                replica: unpack, load, probe, mark ready
 *
 * publishPolicy and republishPolicy are what histories recorded before the
 * fan-out call: the same loads, in parallel, from the control worker.
 */
import { Context } from '@temporalio/activity';
import type { RunConfig } from '../core/config';
import type { PublishResult } from '../core/policy/publisher';
import { type PublishVia, type ReplicaVersionTarget, replicaUrl } from '../core/policy/replicas';
import { adapterDirFromEnv } from '../core/trainer/sampler-weights';
import { loadVersionOnReplica, type ReplicaLoadDeps } from '../core/publish/replica-loader';
import { defaultClients } from './clients';
import { withHeartbeatClock } from './heartbeat';
import type { ActivityDeps, RunContext } from './run-context';

/** What publishing a policy version did, small enough for the step summary. */
export interface PublishSummary {
  servers: number;
  /** The largest mean |Δ| log-prob between a server's answer to the probe and the trainer's; null without a probe. */
  probeMeanAbsDiff: number | null;
  /** Servers that had the adapter name with other weights and loaded the step's in place. */
  reloaded: number;
}

/** The replicas a version goes to, and how each gets it. */
export interface PublishPlan {
  policyVersion: string;
  samplerPath: string;
  /** A republish: the step whose weights these are and the probe that checks them (absent from a new version's plan). */
  step?: number;
  probeOf?: { runId: string; step: number };
  replicas: Array<{ replica: string; via: PublishVia }>;
}

export interface PublishVersionInput {
  runId: string;
  step: number;
  policyVersion: string;
  samplerPath: string;
  /** The trainer step whose probe checks the load; the step itself when absent. */
  probeOf?: { runId: string; step: number };
}

export function createPublishActivities(deps: ActivityDeps, context: RunContext) {
  const { store, logger } = deps;
  const replicaLoadDeps = replicaLoadDepsFor(deps, context);

  /** The run's replicas, each with a 'pending' row for the version. */
  async function plan(input: PublishVersionInput): Promise<PublishPlan> {
    const { config } = await context.loadRun(input.runId);
    const replicas = await deps.replicaAddresses!.expand(configuredServers(config));
    const via = config.policy.publishVia;
    const probeOf = input.probeOf ?? { runId: input.runId, step: input.step };
    await store.replicas.plan(
      replicas.map((replica) => ({
        replica,
        runId: input.runId,
        policyVersion: input.policyVersion,
        step: input.step,
        samplerPath: input.samplerPath,
        probeOf,
        via,
      })),
    );
    return { policyVersion: input.policyVersion, samplerPath: input.samplerPath, replicas: replicas.map((replica) => ({ replica, via })) };
  }

  /** One replica, under a heartbeat clock (unpacking a big adapter takes minutes). */
  async function loadOn(input: PublishVersionInput & { replica: string }): Promise<PublishResult> {
    const { config } = await context.loadRun(input.runId);
    const activity = Context.current();
    let phase = 'starting';
    const target: ReplicaVersionTarget = {
      replica: replicaUrl(input.replica),
      runId: input.runId,
      policyVersion: input.policyVersion,
      step: input.step,
      samplerPath: input.samplerPath,
      probeOf: input.probeOf ?? { runId: input.runId, step: input.step },
      via: config.policy.publishVia,
    };
    const loadDeps = { ...(await replicaLoadDeps(input.runId, activity.cancellationSignal)), onPhase: (p: string) => void (phase = p) };
    const result = await withHeartbeatClock(
      () => ({ step: input.step, replica: target.replica, phase }),
      () =>
        loadVersionOnReplica(loadDeps, target, {
          kind: 'publish',
          holder: `publish:${activity.info.workflowExecution?.workflowId ?? activity.info.activityId}`,
        }),
    );
    logger.info(
      {
        runId: input.runId,
        step: input.step,
        policyVersion: input.policyVersion,
        replica: target.replica,
        probeMeanAbsDiff: result.probeMeanAbsDiff,
      },
      'policy version loaded on replica',
    );
    return result;
  }

  /** Histories from before the fan-out: every replica at once from here; at least one must take it. */
  async function publishFromHere(input: PublishVersionInput): Promise<PublishSummary> {
    const planned = await plan(input);
    const settled = await Promise.allSettled(planned.replicas.map(({ replica }) => loadOn({ ...input, replica })));
    const loaded = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    if (loaded.length === 0) throw (settled[0] as PromiseRejectedResult).reason;
    const diffs = loaded.flatMap((r) => (r.probeMeanAbsDiff === null ? [] : [r.probeMeanAbsDiff]));
    return {
      servers: loaded.length,
      probeMeanAbsDiff: diffs.length ? Math.max(...diffs) : null,
      reloaded: loaded.filter((r) => r.reloaded).length,
    };
  }

  /** The version a step published (what a resume or a recovery loads again), or null before any step trained. */
  async function publishedAt(runId: string, step: number): Promise<PublishVersionInput | null> {
    const trained = await store.trainerStep(runId, step);
    return trained ? { runId, step, policyVersion: trained.policyVersion, samplerPath: trained.samplerPath } : null;
  }

  return {
    /** The run's replicas for a new policy version, each marked pending for it until loaded. */
    async planPublish(input: PublishVersionInput): Promise<PublishPlan> {
      return plan(input);
    },

    /**
     * The same for the run's current version (a resume, a recovery): `policyVersion` as published before
     * (a restored model's too), else the version step `step` trained; null while the run samples the base model.
     */
    async planRepublish(input: { runId: string; step: number; policyVersion?: string }): Promise<PublishPlan | null> {
      const known = input.policyVersion ? await store.replicas.target(input.policyVersion) : null;
      const published = known
        ? {
            runId: input.runId,
            step: known.step,
            policyVersion: known.policyVersion,
            samplerPath: known.samplerPath,
            probeOf: known.probeOf,
          }
        : await publishedAt(input.runId, input.step);
      if (!published || (input.policyVersion !== undefined && published.policyVersion !== input.policyVersion)) return null;
      return {
        ...(await plan(published)),
        step: published.step,
        probeOf: published.probeOf ?? { runId: input.runId, step: published.step },
      };
    },

    /**
     * Loads a policy version on one replica and checks it with the probe of the step that trained it, or
     * of `probeOf` (a restored or forked model: the step whose state it loaded); marks it ready there.
     */
    async loadPolicyOnReplica(input: PublishVersionInput & { replica: string }): Promise<PublishResult> {
      return loadOn(input);
    },

    /** Recorded before the fan-out: every replica loaded from the control worker. */
    async publishPolicy(input: PublishVersionInput): Promise<PublishSummary> {
      return publishFromHere(input);
    },

    /** Recorded before the fan-out: the current version loaded again on every replica. */
    async republishPolicy(input: { runId: string; step: number }): Promise<void> {
      const published = await publishedAt(input.runId, input.step);
      if (published) await publishFromHere(published);
    },
  };
}

/**
 * What a replica keeper (core/publish/replica-keeper.ts) of this worker needs
 * to load a run's version: the run's stored config, this worker's adapter
 * folder and secrets.
 */
export function replicaLoadDepsFor(
  deps: ActivityDeps,
  context: RunContext,
): (runId: string, signal: AbortSignal) => Promise<ReplicaLoadDeps> {
  const clients = deps.clients ?? defaultClients;
  const adapterDir = deps.adapterDir ?? adapterDirFromEnv();
  return async (runId, signal) => {
    const { config } = await context.loadRun(runId);
    return {
      replicas: deps.store.replicas,
      probeOf: async (probeRunId, step) => (await deps.store.trainerStep(probeRunId, step))?.probe ?? null,
      trainer: clients.trainer(config, signal),
      checkpointsDir: config.trainer.checkpointsDir,
      adapterDir,
      apiKey: clients.policyApiKey(config),
      tolerance: config.policy.probeTolerance,
      baseModel: config.policy.model,
      signal,
    };
  };
}

/** The inference servers a config names: inferenceServers, else its baseUrl. */
export function configuredServers(config: Pick<RunConfig, 'policy'>): string[] {
  return config.policy.inferenceServers.length ? config.policy.inferenceServers : [config.policy.baseUrl];
}
