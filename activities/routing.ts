/**
 * The router's activities: measuring profiles from a probe pass, choosing the
 * siblings that rescue a dead group, and Rank-1 routes for evaluation
 * (core/router/).
 */
import { ApplicationFailure, CancelledFailure, Context } from '@temporalio/activity';
import { FAILURE_TYPES } from '../core/failure-types';
import { buildProfiles, probeOutcome, profileShift } from '../core/router/profiles';
import { rank1Routes } from '../core/router/rank1';
import { routeDeadGroup, type RoutingDecision } from '../core/router/router';
import type { DeadGroup } from '../core/router/validation';
import type { ActivityDeps, RunContext } from './run-context';

export function createRoutingActivities(deps: ActivityDeps, context: RunContext) {
  const { store, logger } = deps;

  async function profilesOf(runId: string, version: number) {
    const profiles = await store.profiles(runId, version);
    if (!profiles) throw ApplicationFailure.nonRetryable(`run ${runId} has no profile version ${version}`, FAILURE_TYPES.MissingProfiles);
    return profiles;
  }

  return {
    /** Builds a profile version from a probe pass's stored rollouts. */
    async saveProfiles(input: {
      runId: string;
      phase: string;
      version: number;
      policyVersion: string;
      taskIds: string[];
      fixedTaskIds?: string[];
    }) {
      const fixed = new Set(input.fixedTaskIds ?? input.taskIds);
      const { config, env } = await context.loadRun(input.runId);
      const pool = context.harnessPool(config, env);
      const kinds = new Map(env.listTasks().map((t) => [t.taskId, t.kind]));
      const outcomes = [];
      for (const taskId of input.taskIds) {
        const rollouts = await store.rolloutSummaries(
          input.runId,
          input.phase,
          0,
          taskId,
          pool.all.map((h) => h.id),
        );
        outcomes.push(
          probeOutcome({
            taskId,
            kind: kinds.get(taskId) ?? 'unknown',
            baseHarnessId: pool.base.id,
            fixedSample: fixed.has(taskId),
            rollouts,
          }),
        );
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

    /**
     * The router: which k siblings retry a dead group, by the run's strategy.
     * The decision is recorded; a retry returns the recorded one, so voters
     * that answer differently the second time change nothing.
     */
    async chooseRescueHarnesses(input: {
      runId: string;
      step: number;
      profileVersion: number;
      group: DeadGroup;
    }): Promise<RoutingDecision> {
      const recorded = await store.routingDecision(input.runId, input.step, input.group.taskId);
      if (recorded) return recorded;
      const { config, env } = await context.loadRun(input.runId);
      const profiles = await profilesOf(input.runId, input.profileVersion);
      const { siblings } = context.harnessPool(config, env);
      const log = logger.child({ runId: input.runId, step: input.step, taskId: input.group.taskId });
      const activity = Context.current();
      const decision = await routeDeadGroup({
        strategy: config.router.strategy,
        profiles,
        group: input.group,
        k: config.rescue.k,
        groupSize: config.rollout.groupSize,
        siblings: siblings.map((h) => ({ id: h.id, direction: h.direction, description: h.description })),
        seed: config.seed,
        step: input.step,
        voters: config.router.voters,
        taskText: config.router.strategy === 'vote' ? env.describeTask(input.group.taskId) : '',
        signal: activity.cancellationSignal,
      });
      // Cancelled (e.g. the worker is shutting down): voters cut short say nothing about the task; record nothing.
      if (activity.cancellationSignal.aborted) throw new CancelledFailure('routing cancelled before the voters answered');
      for (const vote of decision.votes) {
        if (!vote.ok) log.warn({ voter: vote.voter, reason: vote.reason }, 'voter dropped for this decision');
      }
      if (decision.fallback) log.warn({ voters: decision.votes.length }, 'no voter answered usably; the validation rule decided');
      log.info({ strategy: decision.strategy, chosen: decision.chosen, profileVersion: decision.profileVersion }, 'rescue routed');
      return store.recordRoutingDecision(input.runId, input.step, decision);
    },

    /** Rank-1 routing for evaluation: task kind -> the pool's best harness by the given profiles. */
    async rank1Routes(input: { runId: string; profileVersion: number }): Promise<Record<string, string>> {
      const { config, env } = await context.loadRun(input.runId);
      const profiles = await profilesOf(input.runId, input.profileVersion);
      const pool = context.harnessPool(config, env);
      const kinds = [...new Set(env.listTasks().map((t) => t.kind))].sort();
      return rank1Routes(
        profiles,
        pool.all.map((h) => h.id),
        pool.base.id,
        kinds,
      );
    },
  };
}
