/**
 * The evolution's activities (workflow evolveHarnessPool): preparing it,
 * rolling out a harness on a task (diagnosis, validation, effect matrix),
 * asking a proposer for a candidate, recording selections, freezing the pool.
 * Each reads what the store holds before it works: a rollout, a proposal
 * attempt, a candidate, a selection or a pool recorded once is never redone.
 */
import path from 'node:path';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { mapWithConcurrency } from '../core/concurrency';
import { FAILURE_TYPES } from '../core/failure-types';
import type { Environment } from '../core/harness/environment';
import { parseEvolutionConfig, type EvolutionConfig } from '../core/evolution/config';
import type { EvolutionGroup } from '../core/evolution/diagnosis';
import type { SiblingDirection } from '../core/evolution/failure-directions';
import type { HarnessSpace } from '../core/evolution/harness-space';
import { baseSpecFor, envFailureDirections, envIdOf, fetchFrozenPool, harnessSpaceFor } from '../core/envs/registry';
import { isSimulatedEnv } from '../core/sim-kind';
import { frozenPoolOf, type FreezeRequest } from '../core/evolution/freeze';
import {
  buildProposalRequest,
  judgeAnswer,
  proposalMessages,
  refusalMessages,
  truncateTurns,
  type FailureExample,
  type ParentResults,
} from '../core/evolution/proposal';
import { askProposer, proposerLabel } from '../core/evolution/proposer-client';
import { candidateIdOf } from '../core/evolution/selection';
import type { PreparedEvolution, ProposalOutcome } from '../core/evolution/prepared';
import { EvolutionNameInUseError, type StoredCandidate } from '../core/store/evolution-store';
import { devTasksFor } from '../core/evolution/dev-tasks';
import { contentHash, poolsRoot, readFrozenPool, writeFrozenPool } from '../core/harness/frozen-pool';
import { runEpisode } from '../core/harness/runtime';
import { PolicyClient } from '../core/policy/client';
import type { ChatMessage, FailureType } from '../core/policy/trajectory';
import { hashSeed } from '../core/random';
import { apiKeyOf } from '../core/secrets';
import { withHeartbeatClock } from './heartbeat';
import type { ActivityDeps } from './run-context';

export function createEvolutionActivities(deps: Pick<ActivityDeps, 'store' | 'logger' | 'environmentFor'>) {
  const { logger } = deps;
  const store = deps.store.evolutions;

  async function loadEvolution(
    evolutionId: string,
  ): Promise<{ config: EvolutionConfig; env: Environment; space: HarnessSpace; baseSpec: Record<string, unknown> }> {
    const stored = await store.getEvolution(evolutionId);
    if (!stored)
      throw ApplicationFailure.nonRetryable(`evolution ${evolutionId} is not registered in the run store`, FAILURE_TYPES.UnknownEvolution);
    const config = parseEvolutionConfig(stored.config, `stored config of evolution ${evolutionId}`);
    await fetchFrozenPool(config.env, store);
    const env = deps.environmentFor(config);
    return { config, env, space: harnessSpaceFor(config.env, env), baseSpec: stored.baseSpec };
  }

  /** What a candidate slot starts from: the evolution, the parent's spec, the attempts recorded so far, and the candidate if one was accepted. */
  async function loadSlot(input: ProposeCandidateInput) {
    const { config, space, baseSpec } = await loadEvolution(input.evolutionId);
    const candidateId = candidateIdOf(input.direction, input.round, input.slot);
    const parent = input.parentId === baseSpec.id ? baseSpec : (await store.getCandidate(input.evolutionId, input.parentId))?.spec;
    if (!parent)
      throw ApplicationFailure.nonRetryable(
        `evolution ${input.evolutionId} has no candidate ${input.parentId} to be a parent`,
        FAILURE_TYPES.UnknownCandidate,
      );
    const recorded = await store.proposals(input.evolutionId, { round: input.round, direction: input.direction, slot: input.slot });
    const existing = await store.getCandidate(input.evolutionId, candidateId);
    return { config, space, baseSpec, candidateId, parent, recorded, existing };
  }
  type Slot = Awaited<ReturnType<typeof loadSlot>>;

  /** The proposer's first prompt: the parent, and the base harness's failures of the types this direction repairs. */
  async function proposalPrompt(input: ProposeCandidateInput, slot: Slot): Promise<ChatMessage[]> {
    const { config, space, baseSpec, parent } = slot;
    const mapping = envFailureDirections(config.env, config.failureDirections);
    const failed = await store.failedRollouts(input.evolutionId, 'diagnose', String(baseSpec.id), input.targetTaskIds);
    const examples = pickExamples(
      failed.filter((r) => r.failureType !== null && mapping[r.failureType].includes(input.direction)),
      config.failuresInPrompt,
      config.turnChars,
    );
    return proposalMessages(
      buildProposalRequest({
        space,
        direction: input.direction,
        round: input.round,
        slot: input.slot,
        parent,
        failures: examples,
        parentResults: input.parentResults,
      }),
    );
  }

  /** One attempt: what the store kept decides (an attempt recorded before, or by a concurrent run of this slot, is never asked again); else the proposer is asked and its answer judged and recorded. */
  async function askOrReplay(
    input: ProposeCandidateInput,
    slot: Slot,
    proposer: Slot['config']['proposers'][number],
    messages: ChatMessage[],
    attempt: number,
    signal: AbortSignal,
  ) {
    const recorded = slot.recorded.find((p) => p.attempt === attempt);
    if (recorded) return recorded;
    const where = `proposers.${slot.config.proposers.indexOf(proposer)}`;
    const answer = await askProposer(proposer, messages, where, signal);
    const verdict = judgeAnswer({
      answer,
      space: slot.space,
      direction: input.direction,
      parent: slot.parent,
      candidateId: slot.candidateId,
      parentId: input.parentId,
    });
    return store.recordProposal(input.evolutionId, {
      round: input.round,
      direction: input.direction,
      slot: input.slot,
      attempt,
      proposer: proposerLabel(proposer),
      messages,
      answer,
      verdict: verdict.verdict,
      reason: verdict.verdict === 'accepted' ? null : verdict.reason,
    });
  }

  /** An accepted answer, judged again by this version's checks, stored as the slot's candidate. */
  async function keepAccepted(input: ProposeCandidateInput, slot: Slot, answer: string, attempt: number): Promise<StoredCandidate> {
    const verdict = judgeAnswer({
      answer,
      space: slot.space,
      direction: input.direction,
      parent: slot.parent,
      candidateId: slot.candidateId,
      parentId: input.parentId,
    });
    if (verdict.verdict !== 'accepted') {
      throw ApplicationFailure.nonRetryable(
        `evolution ${input.evolutionId}: the answer recorded as accepted for ${slot.candidateId} (attempt ${attempt}) no longer passes this version's checks: ${verdict.reason}; start the evolution under a new name`,
        FAILURE_TYPES.RecordedProposalInvalid,
      );
    }
    await store.recordCandidate(input.evolutionId, {
      candidateId: slot.candidateId,
      round: input.round,
      direction: input.direction,
      slot: input.slot,
      parent: input.parentId,
      spec: verdict.spec,
      version: contentHash(verdict.spec),
    });
    return (await store.getCandidate(input.evolutionId, slot.candidateId))!;
  }

  return {
    /** Validates the config, registers the evolution (or finds it: a resume), draws the dev tasks. */
    async prepareEvolution(input: { config: unknown }): Promise<PreparedEvolution> {
      const config = parseEvolutionConfig(input.config);
      await fetchFrozenPool(config.env, store);
      const env = deps.environmentFor(config);
      const baseSpec = baseSpecFor(config.env, env, config.base);
      const devTasks = devTasksFor(env.listTasks(), config.dev, config.seed);
      const stored = await store.registerEvolution({ evolutionId: config.name, env: envIdOf(config.env), config, baseSpec, devTasks });
      if (contentHash(stored.devTasks) !== contentHash(devTasks)) {
        throw new EvolutionNameInUseError(
          `evolution ${config.name} was started on other dev tasks than its env now gives (did its task file change?); its records are of those tasks: start this one under another name`,
        );
      }
      logger.info({ evolutionId: config.name, env: envIdOf(config.env), devTasks: devTasks.length }, 'evolution prepared');
      return {
        evolutionId: config.name,
        config,
        env: envIdOf(config.env),
        simulated: isSimulatedEnv(config.env.kind),
        devTasks,
        baseId: String(baseSpec.id),
        baseVersion: contentHash(baseSpec),
        failureDirections: envFailureDirections(config.env, config.failureDirections),
      };
    },

    /**
     * `samples` rollouts of one harness (the base or a candidate) on one task,
     * each stored as it ends, with the executor policy and the sampling a run
     * uses; rollouts already stored are not redone.
     */
    async runEvolutionGroup(input: {
      evolutionId: string;
      phase: string;
      candidateId: string;
      taskId: string;
      samples: number;
    }): Promise<EvolutionGroup> {
      const { config, env, space, baseSpec } = await loadEvolution(input.evolutionId);
      const spec = input.candidateId === baseSpec.id ? baseSpec : (await store.getCandidate(input.evolutionId, input.candidateId))?.spec;
      if (!spec)
        throw ApplicationFailure.nonRetryable(
          `evolution ${input.evolutionId} has no candidate ${input.candidateId}`,
          FAILURE_TYPES.UnknownCandidate,
        );
      const harness = space.harness(spec);
      const task = env.listTasks().find((t) => t.taskId === input.taskId);
      if (!task) throw ApplicationFailure.nonRetryable(`env ${env.id} has no task ${input.taskId}`, FAILURE_TYPES.UnknownTask);
      const stored = await store.groupRollouts(input.evolutionId, input.phase, input.candidateId, input.taskId);
      const have = new Set(stored.map((r) => r.sample));
      const todo = Array.from({ length: input.samples }, (_, sample) => sample).filter((s) => !have.has(s));
      const policy = new PolicyClient({ ...config.executor, apiKey: apiKeyOf(config.executor, 'executor') });
      const activity = Context.current();
      let completed = stored.length;
      await withHeartbeatClock(
        () => ({ completed }),
        () =>
          mapWithConcurrency(
            todo,
            config.concurrency,
            async (sample) => {
              const t = await runEpisode({
                env,
                harness,
                policy,
                model: config.executor.model,
                taskId: input.taskId,
                sample,
                maxTurns: config.maxTurns,
                maxTokens: config.maxTokens,
                temperature: config.executor.temperature,
                seed: hashSeed(config.seed, 'evolve', input.phase, input.candidateId, input.taskId, sample),
                signal: activity.cancellationSignal,
              });
              await store.insertRollouts(input.evolutionId, input.phase, input.candidateId, input.taskId, [
                {
                  sample,
                  taskKind: t.taskKind,
                  success: t.success,
                  failureType: t.failureType,
                  turns: t.turns,
                  tokens: t.tokens,
                  messages: t.messages,
                },
              ]);
              completed += 1;
              activity.heartbeat({ completed });
            },
            activity.cancellationSignal,
          ),
      );
      const rows = (await store.groupRollouts(input.evolutionId, input.phase, input.candidateId, input.taskId)).filter(
        (r) => r.sample < input.samples,
      );
      const failures: EvolutionGroup['failures'] = {};
      for (const r of rows)
        if (!r.success) failures[r.failureType ?? 'policy_error'] = (failures[r.failureType ?? 'policy_error'] ?? 0) + 1;
      return {
        phase: input.phase,
        candidateId: input.candidateId,
        taskId: input.taskId,
        kind: task.kind,
        rollouts: rows.length,
        successes: rows.filter((r) => r.success).length,
        failures,
      };
    },

    /**
     * One candidate of (round, direction, slot): a proposer is asked (the
     * slot picks which, in turn), its answer judged; a refused answer goes
     * back with the reason, up to `proposalRetries` times. Attempts already
     * recorded are replayed from the store, not asked again.
     */
    async proposeCandidate(input: ProposeCandidateInput): Promise<ProposalOutcome> {
      const slot = await loadSlot(input);
      if (slot.existing) return acceptedOutcome(input, slot.candidateId, slot.existing, slot.recorded.length);
      let messages = await proposalPrompt(input, slot);
      const proposer = slot.config.proposers[(input.slot - 1) % slot.config.proposers.length];
      const log = logger.child({ evolutionId: input.evolutionId, round: input.round, direction: input.direction, slot: input.slot });
      const activity = Context.current();
      let attemptsDone = 0;
      let lastReason = '';
      // A proposer may think for minutes: heartbeat on a clock, so a dead worker's proposal moves on soon and a cancel reaches the request.
      return withHeartbeatClock(
        () => ({ attempts: attemptsDone }),
        async (): Promise<ProposalOutcome> => {
          for (let attempt = 0; attempt <= slot.config.proposalRetries; attempt++) {
            const stored = await askOrReplay(input, slot, proposer, messages, attempt, activity.cancellationSignal);
            attemptsDone = attempt + 1;
            activity.heartbeat({ attempts: attemptsDone });
            if (stored.verdict === 'accepted') {
              const kept = await keepAccepted(input, slot, stored.answer, attempt);
              log.info({ candidateId: slot.candidateId, attempt, version: kept.version }, 'candidate accepted');
              return acceptedOutcome(input, slot.candidateId, kept, attempt + 1);
            }
            lastReason = stored.reason ?? 'refused';
            log.info({ attempt, verdict: stored.verdict, reason: lastReason }, 'proposal refused');
            messages = [...messages, ...refusalMessages(stored.answer, lastReason)];
          }
          const attempts = slot.config.proposalRetries + 1;
          return { status: 'dropped', slot: input.slot, attempts, reason: `refused ${attempts} times; last: ${lastReason}` };
        },
      );
    },

    async recordSelection(input: { evolutionId: string; round: number; direction: string; decision: unknown }): Promise<void> {
      await store.recordSelection(input.evolutionId, input.round, input.direction, input.decision);
    },

    /** Writes the pool (spec files and manifest) under its hash, and stores it; a pool frozen before is left as it is. */
    async freezePool(input: FreezeRequest): Promise<{ poolHash: string; dir: string }> {
      const stored = await store.getEvolution(input.evolutionId);
      if (!stored)
        throw ApplicationFailure.nonRetryable(
          `evolution ${input.evolutionId} is not registered in the run store`,
          FAILURE_TYPES.UnknownEvolution,
        );
      const candidates = await store.candidates(input.evolutionId);
      const { manifest, specs } = frozenPoolOf({
        request: input,
        env: stored.env,
        baseSpec: stored.baseSpec,
        candidates,
        createdAt: new Date().toISOString(),
      });
      const existing = await store.getPool(manifest.hash);
      const dir = writeFrozenPool(
        poolsRoot(),
        existing ? (existing.manifest as typeof manifest) : manifest,
        existing ? existing.specs : specs,
      );
      // What the folder holds is the pool (a crash between writing it and storing it must not leave two versions of it).
      const frozen = readFrozenPool(dir, manifest.hash);
      await store.savePool({
        poolHash: manifest.hash,
        env: stored.env,
        evolutionId: input.evolutionId,
        manifest: frozen.manifest,
        specs: frozen.specs,
      });
      logger.info(
        { evolutionId: input.evolutionId, poolHash: manifest.hash, dir, siblings: manifest.members.length - 1 },
        'harness pool frozen',
      );
      return { poolHash: manifest.hash, dir: path.resolve(dir) };
    },
  };
}

/** Up to `limit` failing trajectories, spread over task kinds and tasks (one per task first), in a fixed order. */
/** One candidate of (round, direction, slot). */
interface ProposeCandidateInput {
  evolutionId: string;
  round: number;
  direction: SiblingDirection;
  slot: number;
  parentId: string;
  parentResults: ParentResults | null;
  /** The tasks this direction targets (their failing base rollouts are the examples). */
  targetTaskIds: string[];
}

function acceptedOutcome(input: ProposeCandidateInput, candidateId: string, candidate: StoredCandidate, attempts: number): ProposalOutcome {
  return {
    status: 'accepted',
    attempts,
    candidate: {
      candidateId,
      direction: input.direction,
      round: input.round,
      slot: input.slot,
      parent: candidate.parent,
      version: candidate.version,
    },
  };
}

function pickExamples(
  failed: ReadonlyArray<{ taskId: string; taskKind: string; failureType: FailureType | null; messages: ChatMessage[] }>,
  limit: number,
  turnChars: number,
): FailureExample[] {
  const byKind = new Map<string, (typeof failed)[number][]>();
  const seenTasks = new Set<string>();
  const firsts = failed.filter((r) => (seenTasks.has(r.taskId) ? false : (seenTasks.add(r.taskId), true)));
  const rest = failed.filter((r) => !firsts.includes(r));
  for (const r of [...firsts, ...rest]) byKind.set(r.taskKind, [...(byKind.get(r.taskKind) ?? []), r]);
  const picked: (typeof failed)[number][] = [];
  const queues = [...byKind.values()];
  while (picked.length < limit && queues.some((q) => q.length > 0))
    for (const q of queues) if (q.length > 0 && picked.length < limit) picked.push(q.shift()!);
  return picked.map((r) => ({
    taskId: r.taskId,
    kind: r.taskKind,
    failureType: r.failureType ?? 'unknown',
    turns: truncateTurns(r.messages, turnChars),
  }));
}
