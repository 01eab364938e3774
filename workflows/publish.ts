/**
 * A policy version published to every inference replica of a run, all at
 * once: the run's replicas from planPublish, then one loadPolicyOnReplica per
 * replica, on the control queue or the queue of the worker beside it
 * (`policy.publishVia`). The version goes live once every replica that could
 * be reached has it; a replica that could not (down, cut off, its worker
 * gone) stays 'pending' in the run store and gets it from its keeper when it
 * is back. With no replica at all, publishing fails as an outage (the run
 * pauses with the reason); when every replica refused the adapter itself,
 * the run fails with that error.
 *
 * Workflow code: deterministic, no I/O.
 */
import { ApplicationFailure, patched, proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities, PublishPlan, PublishSummary } from '../activities';
import type { RetryConfig } from '../core/config';
import { FAILURE_TYPES } from '../core/failure-types';
import { replicaTaskQueue } from '../core/policy/replicas';
import { controlActivityOptions, publishActivityOptions, replicaLoadOptions } from './activity-options';
import { TASK_QUEUES } from './definitions';
import { isFinal, rootFailure } from './failures';
import { upgradePublishSummary } from './upgrade';

export interface PublishVersion {
  runId: string;
  step: number;
  policyVersion: string;
  samplerPath: string;
  probeOf?: { runId: string; step: number };
}

/** A replica's outcome, for the run's status. */
export interface ReplicaPublishOutcome {
  replica: string;
  policyVersion: string;
  loaded: boolean;
  probeMeanAbsDiff: number | null;
  /** Why it did not load; null when it did. */
  reason: string | null;
}

export interface PublishOutcome extends PublishSummary {
  replicas: ReplicaPublishOutcome[];
}

/** Whether this execution publishes per replica (histories from before call publishPolicy, one activity). */
function fansOut(): boolean {
  return patched('publish-per-replica');
}

export async function publishPolicyVersion(version: PublishVersion, retry?: RetryConfig): Promise<PublishOutcome> {
  if (!fansOut()) {
    const summary = upgradePublishSummary(await proxyActivities<Activities>(publishActivityOptions(retry)).publishPolicy(version));
    return { ...summary, replicas: [] };
  }
  const plan = await proxyActivities<Activities>(controlActivityOptions(retry)).planPublish(version);
  return loadEverywhere(version, plan, retry);
}

/**
 * The version step `step` published, loaded again where a replica lacks it
 * (a resume, a recovery: replicas may have restarted meanwhile); nothing
 * before any step trained.
 */
export async function republishPolicyVersion(
  input: { runId: string; step: number; policyVersion?: string },
  retry?: RetryConfig,
): Promise<PublishOutcome | null> {
  if (!fansOut()) {
    await proxyActivities<Activities>(publishActivityOptions(retry)).republishPolicy({ runId: input.runId, step: input.step });
    return null;
  }
  const plan = await proxyActivities<Activities>(controlActivityOptions(retry)).planRepublish(input);
  if (plan === null) return null;
  const step = plan.step ?? input.step;
  return loadEverywhere(
    { runId: input.runId, step, policyVersion: plan.policyVersion, samplerPath: plan.samplerPath, probeOf: plan.probeOf },
    plan,
    retry,
  );
}

/**
 * Loads the version on every replica of the plan. When not one replica took
 * it (the only replica restarting, every replica cut off), all of them are
 * tried again on the run's retry schedule before publishing fails as an
 * outage: one replica down never holds the others back, and all of them
 * down for a moment does not pause the run.
 */
async function loadEverywhere(version: PublishVersion, plan: PublishPlan, retry?: RetryConfig): Promise<PublishOutcome> {
  const attempts = retry?.maxAttempts ?? 10;
  for (let round = 1; ; round++) {
    try {
      return await loadRound(version, plan);
    } catch (err) {
      if (!(err instanceof ApplicationFailure) || err.type !== FAILURE_TYPES.PolicyUnavailable || round >= attempts) throw err;
      await sleep(Math.min(2 ** round, retry?.maxIntervalSeconds ?? 30) * 1000);
    }
  }
}

async function loadRound(version: PublishVersion, plan: PublishPlan): Promise<PublishOutcome> {
  const settled = await Promise.allSettled(
    plan.replicas.map(({ replica, via }) => {
      const own = via === 'replica-workers';
      const activities = proxyActivities<Activities>(replicaLoadOptions(own ? replicaTaskQueue(replica) : TASK_QUEUES.control, own));
      return activities.loadPolicyOnReplica({ ...version, replica });
    }),
  );
  const replicas: ReplicaPublishOutcome[] = settled.map((s, i) => ({
    replica: plan.replicas[i].replica,
    policyVersion: version.policyVersion,
    loaded: s.status === 'fulfilled',
    probeMeanAbsDiff: s.status === 'fulfilled' ? s.value.probeMeanAbsDiff : null,
    reason: s.status === 'rejected' ? rootFailure(s.reason).message : null,
  }));
  const loaded = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  if (loaded.length === 0) {
    const failures = settled.map((s) => (s as PromiseRejectedResult).reason);
    // Every replica refused the adapter itself (a rank above --max-lora-rank, another base model): a user must fix it.
    if (failures.length > 0 && failures.every(isFinal)) throw rootFailure(failures[0]);
    const lines = replicas.map((r) => `${r.replica}: ${r.reason}`).join('; ');
    throw ApplicationFailure.create({
      type: FAILURE_TYPES.PolicyUnavailable,
      message:
        plan.replicas.length === 0
          ? `no inference replica to publish ${version.policyVersion} to`
          : `no inference replica loaded ${version.policyVersion}: ${lines}`,
    });
  }
  const diffs = loaded.flatMap((r) => (r.probeMeanAbsDiff === null ? [] : [r.probeMeanAbsDiff]));
  return {
    servers: loaded.length,
    probeMeanAbsDiff: diffs.length ? Math.max(...diffs) : null,
    reloaded: loaded.filter((r) => r.reloaded).length,
    replicas,
  };
}
