/**
 * evolveHarnessPool: Directional Harness Evolution, the stage before
 * training. From the base harness and a dev task split:
 *   1. diagnose  the base on every dev task (G rollouts each); failures are
 *                grouped by type and handed to the directions they call for;
 *                the base is rolled out again on those targets (fresh seeds),
 *                the rate candidates must beat;
 *   2. propose   per direction, `candidatesPerDirection` candidates from the
 *                proposer LLMs, each judged (schema, direction, change);
 *   3. validate  each candidate on its direction's targets and on a sample of
 *                tasks the base solves, one activity per candidate x task;
 *   4. select    the best per direction (rescue rate minus a regression
 *                penalty); it parents the next round, its results in the prompt;
 *   5. freeze    the best per direction that beats the base on its targets,
 *                measured on every target (the effect matrix), written under
 *                its content hash to PostgreSQL and to a folder.
 * Everything is recorded as it happens (activities/evolution.ts), so a
 * crashed or restarted evolution asks no proposer twice and repeats no
 * finished rollout. Deterministic: decisions are pure core functions.
 */
import { ApplicationFailure, defineQuery, proxyActivities, setCurrentDetails, setHandler } from '@temporalio/workflow';
import type { EvolutionActivities } from '../activities';
import type { PreparedEvolution, ProposalOutcome } from '../core/evolution/prepared';
import type { EvolutionConfigInput } from '../core/evolution/config';
import { allTargets, diagnoseFailures, type Diagnosis, type EvolutionGroup, type TargetTask } from '../core/evolution/diagnosis';
import { cellOf, measurePoolEffect, type PoolEffect } from '../core/evolution/effect-matrix';
import type { SiblingDirection } from '../core/evolution/failure-directions';
import type { FrozenSibling } from '../core/evolution/freeze';
import { beatsBase, freshEffectOnTargets, selectForDirection, summarizeCandidate, type CandidateResult } from '../core/evolution/selection';
import type { PairedDifference } from '../core/stats';
import { sampleTasks } from '../core/rl/task-sampling';
import { controlActivityOptions, rolloutActivityOptions } from './activity-options';

export interface EvolveHarnessPoolInput {
  config: EvolutionConfigInput;
}

export interface EvolvedSibling {
  id: string;
  direction: SiblingDirection;
  parent: string;
  bornRound: number;
  /** Its success on its direction's targets, measured afresh after it was chosen. */
  targetRescueRate: number;
  /** The base's there (fresh rollouts too). */
  baseRateOnTargets: number;
  /** Sibling minus base, paired by target task, with its 95% t interval over the tasks. */
  difference: PairedDifference;
  /** Its success there in the validation that chose it (biased up by the choice). */
  validationRescueRate: number;
  regressionRate: number;
  targets: number;
}

export interface EvolutionResult {
  evolutionId: string;
  env: string;
  simulated: boolean;
  /** The frozen pool's content hash: name it in a run config as env.pool. */
  pool: string;
  dir: string;
  base: string;
  siblings: EvolvedSibling[];
  /** Directions that ended with no sibling, and why. */
  withoutSibling: Array<{ direction: SiblingDirection; reason: string }>;
  /** What the evolution did, counted as it planned it (the store's records must match). */
  plan: { proposals: number; candidates: number; dropped: number; groups: Record<string, number>; rollouts: Record<string, number> };
  devTasks: number;
  baseDevSuccess: number;
  effect: PoolEffect;
}

export interface EvolutionStatus {
  evolutionId: string;
  phase: 'preparing' | 'diagnosing' | 'evolving' | 'measuring' | 'freezing' | 'done';
  round: number;
  rounds: number;
  groupsDone: number;
  groupsStarted: number;
  proposalsDone: number;
  best: Partial<Record<SiblingDirection, { candidateId: string; targetRescueRate: number; baseRateOnTargets: number } | null>>;
}
export const evolutionStatusQuery = defineQuery<EvolutionStatus>('evolutionStatus');

const PROPOSER_SLACK_SECONDS = 60;
/** Rollout groups one evolution may plan: about 3 history events each, well under Temporal's 51,200-event limit. */
const MAX_GROUPS = 8000;

/** The most rollout groups the evolution can run, once its targets are known. */
function plannedGroups(config: PreparedEvolution['config'], diagnosis: Diagnosis, regression: number, devTasks: number): number {
  const targets = config.directions.map((d) => (diagnosis.targets[d] ?? []).length);
  const union = allTargets(diagnosis).length;
  const validation = targets.reduce((n, t) => n + (t > 0 ? config.rounds * config.candidatesPerDirection * (t + regression) : 0), 0);
  return devTasks + union + validation + config.directions.length * union;
}

export async function evolveHarnessPool(input: EvolveHarnessPoolInput): Promise<EvolutionResult> {
  const status: EvolutionStatus = { evolutionId: '', phase: 'preparing', round: 0, rounds: 0, groupsDone: 0, groupsStarted: 0, proposalsDone: 0, best: {} };
  setHandler(evolutionStatusQuery, () => status);
  const show = (what: string) => setCurrentDetails(details(status, what));
  show('preparing');

  const prepared: PreparedEvolution = await proxyActivities<EvolutionActivities>(controlActivityOptions()).prepareEvolution({ config: input.config });
  const { config, evolutionId, baseId } = prepared;
  Object.assign(status, { evolutionId, rounds: config.rounds });
  const control = proxyActivities<EvolutionActivities>(controlActivityOptions(config.retry));
  const longestProposer = Math.max(...config.proposers.map((p) => p.timeoutSeconds));
  const propose = proxyActivities<EvolutionActivities>({
    ...controlActivityOptions(config.retry),
    startToCloseTimeout: `${(config.proposalRetries + 1) * longestProposer + PROPOSER_SLACK_SECONDS}s`,
    heartbeatTimeout: '30s',
  });
  const rollout = proxyActivities<EvolutionActivities>(rolloutActivityOptions(config.retry));
  const plan: EvolutionResult['plan'] = { proposals: 0, candidates: 0, dropped: 0, groups: {}, rollouts: {} };

  const group = async (phase: string, candidateId: string, taskId: string): Promise<EvolutionGroup> => {
    status.groupsStarted += 1;
    plan.groups[phase] = (plan.groups[phase] ?? 0) + 1;
    plan.rollouts[phase] = (plan.rollouts[phase] ?? 0) + config.rolloutsPerTask;
    const result = await rollout.runEvolutionGroup({ evolutionId, phase, candidateId, taskId, samples: config.rolloutsPerTask });
    status.groupsDone += 1;
    show(phaseLine(status));
    return result;
  };

  // 1. Diagnose.
  status.phase = 'diagnosing';
  show(`diagnosing the base harness on ${prepared.devTasks.length} dev tasks`);
  const diagnosisGroups = await Promise.all(prepared.devTasks.map((t) => group('diagnose', baseId, t.taskId)));
  const diagnosis: Diagnosis = diagnoseFailures(diagnosisGroups, prepared.failureDirections, config.directions);
  const regressionTaskIds = sampleTasks(diagnosis.solved, config.regressionTasks, config.seed, 0).map((t) => t.taskId);
  const targetsUnion = allTargets(diagnosis);
  const planned = plannedGroups(config, diagnosis, regressionTaskIds.length, prepared.devTasks.length);
  if (planned > MAX_GROUPS) {
    throw ApplicationFailure.nonRetryable(
      `evolution ${evolutionId} would run up to ${planned} rollout groups, more than one workflow history holds well (${MAX_GROUPS}); ` +
        'lower rounds, candidatesPerDirection, dev.tasksPerKind or regressionTasks, or split the directions over several evolutions',
      'EvolutionTooLarge',
    );
  }
  const baseline = await Promise.all(targetsUnion.map((t) => group('baseline', baseId, t.taskId)));

  // 2-4. Propose, validate, select, round after round; within a round the directions run at once.
  status.phase = 'evolving';
  const best: Partial<Record<SiblingDirection, CandidateResult | null>> = {};
  const withoutTargets = config.directions.filter((d) => (diagnosis.targets[d] ?? []).length === 0);
  for (let round = 1; round <= config.rounds; round++) {
    status.round = round;
    show(phaseLine(status));
    await Promise.all(
      config.directions
        .filter((d) => !withoutTargets.includes(d))
        .map(async (direction) => {
          const targets: TargetTask[] = diagnosis.targets[direction] ?? [];
          const parent = best[direction] ?? null;
          const outcomes: ProposalOutcome[] = await Promise.all(
            Array.from({ length: config.candidatesPerDirection }, (_, i) =>
              propose
                .proposeCandidate({
                  evolutionId, round, direction, slot: i + 1,
                  parentId: parent?.candidateId ?? baseId,
                  parentResults: parent ? parentResultsOf(parent) : null,
                  targetTaskIds: targets.map((t) => t.taskId),
                })
                .then((outcome) => {
                  status.proposalsDone += 1;
                  plan.proposals += outcome.attempts;
                  return outcome;
                }),
            ),
          );
          const results = await Promise.all(
            outcomes.flatMap((o) => (o.status === 'accepted' ? [o.candidate] : [])).map(async (candidate) => {
              plan.candidates += 1;
              const groups = await Promise.all([...targets.map((t) => t.taskId), ...regressionTaskIds].map((taskId) => group('validate', candidate.candidateId, taskId)));
              return summarizeCandidate({ candidate, groups, targets, regressionTaskIds, baseline, penalty: config.regressionPenalty });
            }),
          );
          const dropped = outcomes.flatMap((o) => (o.status === 'dropped' ? [{ slot: o.slot, reason: o.reason }] : []));
          plan.dropped += dropped.length;
          const selected = selectForDirection({ round, direction, previous: parent, results, dropped });
          best[direction] = selected.best;
          status.best[direction] = selected.best && { candidateId: selected.best.candidateId, targetRescueRate: selected.best.targetRescueRate, baseRateOnTargets: selected.best.baseRateOnTargets };
          await control.recordSelection({ evolutionId, round, direction, decision: selected.decision });
        }),
    );
  }

  // 5. Measure the effect matrix and freeze.
  status.phase = 'measuring';
  const finalists = config.directions.flatMap((d) => {
    const result = best[d] ?? null;
    return result !== null && beatsBase(result) ? [result] : [];
  });
  const effectGroups = (await Promise.all(finalists.map((s) => Promise.all(targetsUnion.map((t) => group('effect', s.candidateId, t.taskId)))))).flat();
  // The final word is the fresh measurement, not the validation that chose the finalist.
  const measured = finalists.map((s) => ({ chosen: s, fresh: freshEffectOnTargets({ candidateId: s.candidateId, targets: diagnosis.targets[s.direction] ?? [], groups: effectGroups, baseline }) }));
  const siblings: FrozenSibling[] = measured
    .filter(({ fresh }) => fresh.targetRescueRate > fresh.baseRateOnTargets)
    .map(({ chosen, fresh }) => ({ ...chosen, validationRescueRate: chosen.targetRescueRate, ...fresh }));
  const siblingIds = new Set(siblings.map((s) => s.candidateId));
  const effect = measurePoolEffect({
    targets: targetsUnion, base: baseId, siblings: [...siblingIds], groups: [...baseline, ...effectGroups.filter((g) => siblingIds.has(g.candidateId))],
  });
  status.phase = 'freezing';
  show('freezing the pool');
  const targetWords = Object.fromEntries(siblings.map((s) => [s.candidateId, [...new Set((diagnosis.targets[s.direction] ?? []).map(cellOf))]]));
  const frozen = await control.freezePool({ evolutionId, siblings, targets: targetWords, effect });
  status.phase = 'done';

  const withoutSibling = config.directions.flatMap((direction) => {
    if (withoutTargets.includes(direction)) return [{ direction, reason: 'the base harness showed no failure this direction repairs on the dev tasks' }];
    const result = best[direction] ?? null;
    if (result === null) return [{ direction, reason: 'no candidate was accepted (see the recorded proposals)' }];
    if (!beatsBase(result)) return [{ direction, reason: `the best candidate ${result.candidateId} rescued ${result.targetRescueRate.toFixed(3)} of its targets, not above the base's ${result.baseRateOnTargets.toFixed(3)}` }];
    const fresh = measured.find((m) => m.chosen.candidateId === result.candidateId)!.fresh;
    if (!siblingIds.has(result.candidateId)) {
      return [{ direction, reason: `the best candidate ${result.candidateId} rescued ${fresh.targetRescueRate.toFixed(3)} of its targets on fresh rollouts, not above the base's ${fresh.baseRateOnTargets.toFixed(3)} (${result.targetRescueRate.toFixed(3)} in its validation)` }];
    }
    return [];
  });
  const result: EvolutionResult = {
    evolutionId,
    env: prepared.env,
    simulated: prepared.simulated,
    pool: frozen.poolHash,
    dir: frozen.dir,
    base: baseId,
    siblings: siblings.map((s) => ({
      id: s.candidateId, direction: s.direction, parent: s.parent, bornRound: s.round,
      targetRescueRate: s.targetRescueRate, baseRateOnTargets: s.baseRateOnTargets, validationRescueRate: s.validationRescueRate,
      difference: s.difference, regressionRate: s.regressionRate,
      targets: (diagnosis.targets[s.direction] ?? []).length,
    })),
    withoutSibling,
    plan,
    devTasks: prepared.devTasks.length,
    baseDevSuccess: diagnosis.baseSuccess,
    effect,
  };
  show(`frozen pool ${frozen.poolHash}: ${siblings.length} siblings`);
  return result;
}

function parentResultsOf(r: CandidateResult) {
  return {
    targetRescueRate: r.targetRescueRate,
    baseRateOnTargets: r.baseRateOnTargets,
    regressionRate: r.regressionRate,
    byKind: Object.fromEntries(Object.entries(r.byKind).map(([kind, t]) => [kind, t.rollouts ? t.successes / t.rollouts : 0])),
  };
}

function phaseLine(s: EvolutionStatus): string {
  return s.phase === 'evolving' ? `round ${s.round} of ${s.rounds}: proposing and validating` : s.phase;
}

function details(s: EvolutionStatus, what: string): string {
  const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
  const best = Object.entries(s.best)
    .map(([d, b]) => `| ${d} | ${b ? `${b.candidateId} | ${pct(b.targetRescueRate)} | ${pct(b.baseRateOnTargets)}` : '(none yet) | | '} |`)
    .join('\n');
  return [
    `**Harness evolution ${s.evolutionId}**: ${what}`,
    '',
    `rollout groups ${s.groupsDone}/${s.groupsStarted} done, proposals ${s.proposalsDone} done`,
    ...(best ? ['', '| direction | best | rescue on targets | base on targets |', '|---|---|---|---|', best] : []),
  ].join('\n');
}
