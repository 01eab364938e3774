/**
 * The Adaptive Harness Router: which k siblings retry a dead group, by the
 * run's strategy. `validation` ranks by profile evidence; `vote` asks voter
 * LLMs and aggregates their rankings by Borda count, falling back to the
 * validation rule when no voter answers usably; `random` and `all` are
 * ablations. Every decision says what it saw, so it can be recorded.
 */
import { createHash } from 'node:crypto';
import type { RouterStrategy, VoterConfig } from '../config';
import { drawDistinct, hashSeed } from '../random';
import type { BehaviorProfiles } from './profiles';
import { rankByValidation, type DeadGroup } from './validation';
import { bordaCount, collectVotes, failureSummary, type VoteContext, type VoteOutcome } from './vote';

export interface RoutingDecision {
  taskId: string;
  kind: string;
  strategy: RouterStrategy;
  profileVersion: number;
  failureSummary: string;
  /** Base failure type -> count: what the router was given. */
  failureCounts: Record<string, number>;
  /** sha256 of the task and its failure summary: equal digests, equal router input. */
  failureDigest: string;
  chosen: string[];
  /** validation: expected rescue rates; vote: Borda points; random/all: none. */
  scores: Record<string, number>;
  votes: VoteOutcome[];
  /** The vote strategy had no usable vote and the validation rule decided. */
  fallback: boolean;
}

export interface RouteRequest {
  strategy: RouterStrategy;
  profiles: BehaviorProfiles;
  siblings: ReadonlyArray<{ id: string; direction: string; description: string }>;
  group: DeadGroup;
  k: number;
  /** G: `all` sends the group to at most G siblings, one rollout each. */
  groupSize: number;
  /** The run's seed and step: the random strategy draws from them, reproducibly. */
  seed: number;
  step: number;
  voters: readonly VoterConfig[];
  /** The task as the agent sees it, for voters. */
  taskText: string;
  signal?: AbortSignal;
}

export function failureDigest(taskId: string, summary: string): string {
  return createHash('sha256').update(`${taskId}\n${summary}`).digest('hex').slice(0, 16);
}

export async function routeDeadGroup(request: RouteRequest): Promise<RoutingDecision> {
  const { profiles, group, k, strategy } = request;
  const ids = request.siblings.map((s) => s.id);
  const summary = failureSummary(group);
  const decided = (chosen: string[], extra: Partial<RoutingDecision> = {}): RoutingDecision => ({
    taskId: group.taskId,
    kind: group.kind,
    strategy,
    profileVersion: profiles.version,
    failureSummary: summary,
    failureCounts: group.failureCounts,
    failureDigest: failureDigest(group.taskId, summary),
    chosen,
    scores: {},
    votes: [],
    fallback: false,
    ...extra,
  });
  const validation = rankByValidation(profiles, ids, group);
  switch (strategy) {
    case 'validation':
      return decided(validation.ranked.slice(0, k), { scores: validation.scores });
    case 'random':
      return decided(drawDistinct(ids, k, hashSeed('router-random', request.seed, group.taskId), request.step));
    case 'all':
      // More siblings than rollouts: the G best by the validation rule, so every chosen sibling runs.
      return decided(ids.length <= request.groupSize ? [...ids] : validation.ranked.slice(0, request.groupSize));
    case 'vote': {
      const context: VoteContext = {
        taskId: group.taskId,
        kind: group.kind,
        taskText: request.taskText,
        group,
        siblings: [...request.siblings],
        profiles,
        k,
      };
      const votes = await collectVotes(request.voters, context, { signal: request.signal });
      const rankings = votes.flatMap((v) => (v.ok ? [v.ranking] : []));
      if (rankings.length === 0) {
        return decided(validation.ranked.slice(0, k), { scores: validation.scores, votes, fallback: true });
      }
      const borda = bordaCount(rankings, ids, validation.ranked);
      return decided(borda.ranked.slice(0, k), { scores: borda.points, votes });
    }
  }
}
