/**
 * runRolloutGroup (task queue harness-s-rollout): one rollout group of one
 * task, each rollout an episode of the harness runtime against the policy,
 * stored as soon as it ends; rollouts already stored are not redone.
 */
import { setMaxListeners } from 'node:events';
import { hostname } from 'node:os';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { WorkerReplicaViews } from '../core/policy/replicas';
import { mapWithConcurrency } from '../core/concurrency';
import { FAILURE_TYPES } from '../core/failure-types';
import { runEpisode } from '../core/harness/runtime';
import { countEpisode, observeRescueLatency, recordRolloutStored } from '../core/metrics';
import { hashSeed } from '../core/random';
import type { GroupSummary } from '../core/rl/groups';
import { defaultClients } from './clients';
import { withHeartbeatClock } from './heartbeat';
import type { ActivityDeps, RunContext } from './run-context';
import { envIdOf } from '../core/envs/registry';
import { configuredServers } from './publish';

/** A rollout group's result: its summary, and now and then how the worker that ran it sees the inference replicas. */
export interface RolloutGroupResult extends GroupSummary {
  replicas?: WorkerReplicaViews;
}

const REPLICA_REPORT_MS = 3000;

export function createRolloutActivities(deps: ActivityDeps, context: RunContext) {
  const { store, logger } = deps;
  const workerName = deps.workerName ?? `${process.pid}@${hostname()}`;
  let lastReplicaReport = 0;
  const clients = deps.clients ?? defaultClients;
  return {
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
    }): Promise<RolloutGroupResult> {
      const { config, env } = await context.loadRun(input.runId);
      const pool = context.harnessPool(config, env).all;
      const harnessIds = input.plan.map((p) => p.harnessId);
      const stored = await store.rolloutSummaries(input.runId, input.phase, input.step, input.taskId, harnessIds);
      const have = new Set(stored.map((r) => `${r.harnessId}/${r.sample}`));
      const todo = input.plan.flatMap((p) =>
        Array.from({ length: p.samples }, (_, sample) => ({ harnessId: p.harnessId, sample })).filter(
          (r) => !have.has(`${r.harnessId}/${r.sample}`),
        ),
      );
      const policy = clients.policy(config, deps.balancer!, await deps.replicaAddresses!.expand(configuredServers(config)));
      const task = env.listTasks().find((t) => t.taskId === input.taskId);
      if (!task) throw ApplicationFailure.nonRetryable(`env ${env.id} has no task ${input.taskId}`, FAILURE_TYPES.UnknownTask);
      let completed = stored.length;
      const log = logger.child({ runId: input.runId, step: input.step, taskId: input.taskId, role: input.role });
      if (input.role === 'rescue' && Context.current().info.attempt === 1)
        observeRescueLatency(
          envIdOf(config.env),
          await store.secondsSinceGroupStored(input.runId, input.phase, input.step, input.taskId, 'base'),
        );
      // Heartbeat on a clock, not per rollout: one episode against a real endpoint can outlast the heartbeat timeout.
      const activity = Context.current();
      // Each episode in flight listens to the activity's cancellation (through the policy and the env): more than Node's default 10.
      setMaxListeners(Math.max(10, config.rollout.concurrency * 4), activity.cancellationSignal);
      await withHeartbeatClock(
        () => ({ completed }),
        () =>
          mapWithConcurrency(
            todo,
            config.rollout.concurrency,
            async ({ harnessId, sample }) => {
              const harness = pool.find((h) => h.id === harnessId);
              if (!harness)
                throw ApplicationFailure.nonRetryable(`harness ${harnessId} is not in this run's pool`, FAILURE_TYPES.UnknownHarness);
              const trajectory = await countEpisode(
                { env: envIdOf(config.env), harness: harnessId },
                runEpisode({
                  env,
                  harness,
                  policy: policy.episode(activity.cancellationSignal),
                  model: input.policyVersion,
                  taskId: input.taskId,
                  sample,
                  maxTurns: config.rollout.maxTurns,
                  maxTokens: config.rollout.maxTokens,
                  temperature: config.policy.temperature,
                  seed: hashSeed(config.seed, input.phase, input.step, input.taskId, harnessId, sample),
                  signal: activity.cancellationSignal,
                }),
              );
              const inserted = await store.insertTrajectories(input.runId, input.phase, input.step, input.role, [trajectory]);
              for (const t of inserted)
                recordRolloutStored({ env: envIdOf(config.env), harness: t.harnessId, role: input.role, success: t.success });
              completed += 1;
              activity.heartbeat({ completed });
            },
            activity.cancellationSignal,
          ),
      );
      const rollouts = await store.rolloutSummaries(input.runId, input.phase, input.step, input.taskId, harnessIds);
      log.debug({ rollouts: rollouts.length, reused: stored.length }, 'rollout group done');
      const group: RolloutGroupResult = {
        taskId: task.taskId,
        kind: task.kind,
        role: input.role === 'rescue' ? 'rescue' : 'base',
        rollouts,
      };
      // How this worker sees the replicas, for the run's status: at most every few seconds per worker, so histories stay small.
      if (Date.now() - lastReplicaReport >= REPLICA_REPORT_MS) {
        lastReplicaReport = Date.now();
        group.replicas = { worker: workerName, views: policy.views() };
      }
      return group;
    },
  };
}
