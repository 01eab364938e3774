/**
 * What every activity of a run starts from: its stored config (parsed, with
 * the rules for runs stored by older versions applied), its environment, and
 * its harness pool (core/harness/pool.ts). A frozen pool the config names is
 * written from the run store into this host's pools folder when it lacks it.
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { LatencyProfile } from '../core/latency-profiles';
import type { Logger } from 'pino';
import { keepPreEvaluationShape, parseStoredRunConfig, type RunConfig } from '../core/config';
import type { Environment } from '../core/harness/environment';
import { fetchFrozenPool } from '../core/envs/registry';
import { FAILURE_TYPES } from '../core/failure-types';
import type { Harness } from '../core/harness/harness';
import { selectPool, splitPool } from '../core/harness/pool';
import type { TrainerSessions } from '../core/trainer/tinker/sessions';
import type { RunStore } from '../core/store/run-store';
import type { ActivityClients } from './clients';
import type { ReplicaAddresses } from '../core/policy/replica-addresses';
import type { ReplicaBalancer } from '../core/policy/replica-balancer';

export interface ActivityDeps {
  store: RunStore;
  logger: Logger;
  /** The environment a run's (or an evolution's) config names (callers cache as they see fit). */
  environmentFor(config: Pick<RunConfig, 'env'>): Environment;
  /** This worker process's Tinker sessions, kept alive while it lives. */
  trainerSessions: TrainerSessions;
  /** Where sampler weights are unpacked for the inference servers (they must see it at the same path). */
  adapterDir?: string;
  /** The policy and trainer clients (default: built from the run's config and this worker's secrets). */
  clients?: ActivityClients;
  /** The sim cluster's latency profile, to price sim steps in SIMULATED GPU-seconds; none when absent. */
  simLatency?: LatencyProfile | null;
  /** Where each experiment tracker's server is (trackingEndpointsFromEnv at process start): tracker name -> URL. */
  trackingEndpoints?: Readonly<Record<string, string>>;
  /** Where users open the trajectory viewer (viewerUrlFromEnv at process start): a run's Temporal page links there; none when absent. */
  viewerUrl?: string | null;
  /** A run's HTML report, which trackRun uploads at the run's end (none when absent). */
  runReport?: (runId: string) => Promise<string>;
  /** How this worker process is named (its Temporal identity); pid@host when absent. */
  workerName?: string;
  /** This process's balancer over inference replicas (one per process; createActivities makes one when absent). */
  balancer?: ReplicaBalancer;
  /** Expands a run's configured inference servers into replicas (createActivities makes one when absent). */
  replicaAddresses?: ReplicaAddresses;
}

export interface RunPool {
  all: Harness[];
  base: Harness;
  siblings: Harness[];
}

export interface RunContext {
  loadRun(runId: string): Promise<{ config: RunConfig; env: Environment }>;
  /** The run's harness pool: the harnesses its config names from its env's pool (all of them by default). */
  harnessPool(config: RunConfig, env: Environment): RunPool;
}

export function createRunContext(deps: Pick<ActivityDeps, 'store' | 'environmentFor'>): RunContext {
  return {
    async loadRun(runId) {
      const run = await deps.store.getRun(runId);
      if (!run) throw ApplicationFailure.nonRetryable(`run ${runId} is not registered in the run store`, FAILURE_TYPES.UnknownRun);
      const config = keepPreEvaluationShape(parseStoredRunConfig(run.config, `stored config of run ${runId}`), run.config);
      await fetchFrozenPool(config.env, deps.store.evolutions);
      return { config, env: deps.environmentFor(config) };
    },

    harnessPool(config, env) {
      const all = env.harnesses();
      const { pool, unknown } = selectPool(all, config.harnessPool);
      if (unknown.length > 0) {
        const lines = unknown.map(
          ({ index, id }) =>
            `  - harnessPool.${index}: env '${env.id}' has no harness '${id}' (it has: ${all.map((h) => h.id).join(', ')})`,
        );
        // Non-retryable wherever it is called from: the pool is what the config names.
        throw ApplicationFailure.nonRetryable(`run config is invalid:\n${lines.join('\n')}`, FAILURE_TYPES.RunConfigError);
      }
      const { base, siblings } = splitPool(pool, (issue) =>
        ApplicationFailure.nonRetryable(`run config is invalid:\n  - harnessPool: ${issue}`, FAILURE_TYPES.RunConfigError),
      );
      return { all: pool, base, siblings };
    },
  };
}
