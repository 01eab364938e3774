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
 *
 * The evolution is a small state object (`HarnessEvolution`): its status
 * (what the status query shows), its plan (what it counted), what the
 * diagnosis found and the best candidate of each direction so far. Each stage
 * is a method; `execute` runs them in turn.
 */
import { type ActivityInterfaceFor, ApplicationFailure, proxyActivities, setCurrentDetails, setHandler } from '@temporalio/workflow';
import type { EvolutionActivities } from '../activities';
import type { PreparedEvolution, ProposalOutcome } from '../core/evolution/prepared';
import { allTargets, diagnoseFailures, type Diagnosis, type EvolutionGroup, type TargetTask } from '../core/evolution/diagnosis';
import { cellOf, measurePoolEffect, type PoolEffect } from '../core/evolution/effect-matrix';
import type { SiblingDirection } from '../core/evolution/failure-directions';
import type { FrozenSibling } from '../core/evolution/freeze';
import {
  beatsBase,
  freshEffectOnTargets,
  selectForDirection,
  summarizeCandidate,
  type CandidateRef,
  type CandidateResult,
  type DroppedCandidate,
  type FreshEffect,
} from '../core/evolution/selection';
import { drawDistinct } from '../core/rl/task-sampling';
import { FAILURE_TYPES } from '../core/failure-types';
import { controlActivityOptions, rolloutActivityOptions } from './activity-options';
import {
  details,
  evolutionStatusQuery,
  phaseLine,
  type EvolutionResult,
  type EvolutionStatus,
  type EvolveHarnessPoolInput,
} from './evolution-status';

export {
  evolutionStatusQuery,
  type EvolutionResult,
  type EvolutionStatus,
  type EvolvedSibling,
  type EvolveHarnessPoolInput,
} from './evolution-status';

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
  const evolution = new HarnessEvolution(input);
  setHandler(evolutionStatusQuery, () => evolution.status);
  return evolution.execute();
}

/** A finalist: the result that chose it and its fresh measurement on its targets. */
interface Finalist {
  chosen: CandidateResult;
  fresh: FreshEffect;
}

/** What the effect measurement found: every finalist, the ones that stay siblings, and the pool's effect matrix. */
interface Measurement {
  measured: Finalist[];
  siblings: FrozenSibling[];
  siblingIds: Set<string>;
  effect: PoolEffect;
}

/**
 * One evolution's state. Stages run one after another; within one, activities
 * start in a fixed order (tasks, directions and slots in config order), so a
 * recorded history replays.
 */
class HarnessEvolution {
  readonly status: EvolutionStatus = {
    evolutionId: '',
    phase: 'preparing',
    round: 0,
    rounds: 0,
    groupsDone: 0,
    groupsStarted: 0,
    proposalsDone: 0,
    best: {},
  };
  private readonly plan: EvolutionResult['plan'] = { proposals: 0, candidates: 0, dropped: 0, groups: {}, rollouts: {} };
  /** Set by prepare, with the activity proxies its config calls for. */
  private prepared!: PreparedEvolution;
  private control!: ActivityInterfaceFor<EvolutionActivities>;
  private propose!: ActivityInterfaceFor<EvolutionActivities>;
  private rollout!: ActivityInterfaceFor<EvolutionActivities>;
  /** Set by diagnose: the targets of each direction, the regression sample, every target, the base's fresh rollouts there. */
  private diagnosis!: Diagnosis;
  private regressionTaskIds!: string[];
  private targetsUnion!: TargetTask[];
  private baseline!: EvolutionGroup[];
  /** Directions the diagnosis found nothing to repair for: they get no candidate. */
  private withoutTargets: SiblingDirection[] = [];
  /** The best candidate of each direction so far (null: none accepted yet). */
  private readonly best: Partial<Record<SiblingDirection, CandidateResult | null>> = {};

  constructor(private readonly input: EvolveHarnessPoolInput) {}

  async execute(): Promise<EvolutionResult> {
    this.show('preparing');
    await this.prepare();
    await this.diagnose();
    await this.evolve();
    const measurement = await this.measure();
    const frozen = await this.freeze(measurement);
    return this.resultOf(measurement, frozen);
  }

  /** Registers the evolution (prepareEvolution) and sets up the activity proxies its config calls for. */
  private async prepare(): Promise<void> {
    const prepared = await proxyActivities<EvolutionActivities>(controlActivityOptions()).prepareEvolution({ config: this.input.config });
    this.prepared = prepared;
    const { config } = prepared;
    Object.assign(this.status, { evolutionId: prepared.evolutionId, rounds: config.rounds });
    this.control = proxyActivities<EvolutionActivities>(controlActivityOptions(config.retry));
    const longestProposer = Math.max(...config.proposers.map((p) => p.timeoutSeconds));
    this.propose = proxyActivities<EvolutionActivities>({
      ...controlActivityOptions(config.retry),
      startToCloseTimeout: `${(config.proposalRetries + 1) * longestProposer + PROPOSER_SLACK_SECONDS}s`,
      heartbeatTimeout: '30s',
    });
    this.rollout = proxyActivities<EvolutionActivities>(rolloutActivityOptions(config.retry));
  }

  /** 1. Diagnose: the base on every dev task, its failures handed to directions, then the base again on every target. */
  private async diagnose(): Promise<void> {
    const { prepared, status } = this;
    const { config } = prepared;
    status.phase = 'diagnosing';
    this.show(`diagnosing the base harness on ${prepared.devTasks.length} dev tasks`);
    const diagnosisGroups = await Promise.all(prepared.devTasks.map((t) => this.group('diagnose', prepared.baseId, t.taskId)));
    this.diagnosis = diagnoseFailures(diagnosisGroups, prepared.failureDirections, config.directions);
    this.regressionTaskIds = drawDistinct(this.diagnosis.solved, config.regressionTasks, config.seed, 0).map((t) => t.taskId);
    this.targetsUnion = allTargets(this.diagnosis);
    this.refuseTooLarge();
    this.baseline = await Promise.all(this.targetsUnion.map((t) => this.group('baseline', prepared.baseId, t.taskId)));
  }

  /** Fails the evolution, before it rolls out more, when its plan would outgrow one workflow history. */
  private refuseTooLarge(): void {
    const { config, evolutionId, devTasks } = this.prepared;
    const planned = plannedGroups(config, this.diagnosis, this.regressionTaskIds.length, devTasks.length);
    if (planned > MAX_GROUPS) {
      throw ApplicationFailure.nonRetryable(
        `evolution ${evolutionId} would run up to ${planned} rollout groups, more than one workflow history holds well (${MAX_GROUPS}); ` +
          'lower rounds, candidatesPerDirection, dev.tasksPerKind or regressionTasks, or split the directions over several evolutions',
        FAILURE_TYPES.EvolutionTooLarge,
      );
    }
  }

  /** 2-4. Propose, validate, select, round after round; within a round the directions run at once. */
  private async evolve(): Promise<void> {
    const { config } = this.prepared;
    this.status.phase = 'evolving';
    this.withoutTargets = config.directions.filter((d) => (this.diagnosis.targets[d] ?? []).length === 0);
    for (let round = 1; round <= config.rounds; round++) {
      this.status.round = round;
      this.show(phaseLine(this.status));
      await Promise.all(
        config.directions.filter((d) => !this.withoutTargets.includes(d)).map((direction) => this.evolveDirection(round, direction)),
      );
    }
  }

  /** One round of one direction: its candidates proposed, each accepted one validated, the best of them and the parent kept. */
  private async evolveDirection(round: number, direction: SiblingDirection): Promise<void> {
    const targets: TargetTask[] = this.diagnosis.targets[direction] ?? [];
    const parent = this.best[direction] ?? null;
    const outcomes = await this.proposeCandidates(round, direction, parent, targets);
    const results = await Promise.all(
      outcomes
        .flatMap((o) => (o.status === 'accepted' ? [o.candidate] : []))
        .map((candidate) => this.validateCandidate(candidate, targets)),
    );
    const dropped = outcomes.flatMap((o) => (o.status === 'dropped' ? [{ slot: o.slot, reason: o.reason }] : []));
    this.plan.dropped += dropped.length;
    await this.select(round, direction, parent, results, dropped);
  }

  /** The direction's `candidatesPerDirection` proposals of this round, asked at once, children of the parent. */
  private proposeCandidates(
    round: number,
    direction: SiblingDirection,
    parent: CandidateResult | null,
    targets: TargetTask[],
  ): Promise<ProposalOutcome[]> {
    const { config, evolutionId, baseId } = this.prepared;
    return Promise.all(
      Array.from({ length: config.candidatesPerDirection }, (_, i) =>
        this.propose
          .proposeCandidate({
            evolutionId,
            round,
            direction,
            slot: i + 1,
            parentId: parent?.candidateId ?? baseId,
            parentResults: parent ? parentResultsOf(parent) : null,
            targetTaskIds: targets.map((t) => t.taskId),
          })
          .then((outcome) => {
            this.status.proposalsDone += 1;
            this.plan.proposals += outcome.attempts;
            return outcome;
          }),
      ),
    );
  }

  /** An accepted candidate on its direction's targets and the regression sample, summarized against the baseline. */
  private async validateCandidate(candidate: CandidateRef, targets: TargetTask[]): Promise<CandidateResult> {
    const { regressionTaskIds, baseline } = this;
    this.plan.candidates += 1;
    const groups = await Promise.all(
      [...targets.map((t) => t.taskId), ...regressionTaskIds].map((taskId) => this.group('validate', candidate.candidateId, taskId)),
    );
    return summarizeCandidate({ candidate, groups, targets, regressionTaskIds, baseline, penalty: this.prepared.config.regressionPenalty });
  }

  /** Keeps the round's best of the direction (it parents the next round) and records the decision. */
  private select(
    round: number,
    direction: SiblingDirection,
    parent: CandidateResult | null,
    results: CandidateResult[],
    dropped: DroppedCandidate[],
  ): Promise<void> {
    const selected = selectForDirection({ round, direction, previous: parent, results, dropped });
    this.best[direction] = selected.best;
    this.status.best[direction] = selected.best && {
      candidateId: selected.best.candidateId,
      targetRescueRate: selected.best.targetRescueRate,
      baseRateOnTargets: selected.best.baseRateOnTargets,
    };
    return this.control.recordSelection({ evolutionId: this.prepared.evolutionId, round, direction, decision: selected.decision });
  }

  /** 5a. The best of each direction that beats the base, measured afresh on every target: the siblings and the effect matrix. */
  private async measure(): Promise<Measurement> {
    const { config, baseId } = this.prepared;
    const { diagnosis, targetsUnion, baseline } = this;
    this.status.phase = 'measuring';
    const finalists = config.directions.flatMap((d) => {
      const result = this.best[d] ?? null;
      return result !== null && beatsBase(result) ? [result] : [];
    });
    const effectGroups = (
      await Promise.all(finalists.map((s) => Promise.all(targetsUnion.map((t) => this.group('effect', s.candidateId, t.taskId)))))
    ).flat();
    // The final word is the fresh measurement, not the validation that chose the finalist.
    const measured = finalists.map((s) => ({
      chosen: s,
      fresh: freshEffectOnTargets({
        candidateId: s.candidateId,
        targets: diagnosis.targets[s.direction] ?? [],
        groups: effectGroups,
        baseline,
      }),
    }));
    const siblings: FrozenSibling[] = measured
      .filter(({ fresh }) => fresh.targetRescueRate > fresh.baseRateOnTargets)
      .map(({ chosen, fresh }) => ({ ...chosen, validationRescueRate: chosen.targetRescueRate, ...fresh }));
    const siblingIds = new Set(siblings.map((s) => s.candidateId));
    const effect = measurePoolEffect({
      targets: targetsUnion,
      base: baseId,
      siblings: [...siblingIds],
      groups: [...baseline, ...effectGroups.filter((g) => siblingIds.has(g.candidateId))],
    });
    return { measured, siblings, siblingIds, effect };
  }

  /** 5b. Freezes the pool: the siblings, the cells each targets, the effect matrix. */
  private async freeze({ siblings, effect }: Measurement): Promise<{ poolHash: string; dir: string }> {
    this.status.phase = 'freezing';
    this.show('freezing the pool');
    const targetWords = Object.fromEntries(
      siblings.map((s) => [s.candidateId, [...new Set((this.diagnosis.targets[s.direction] ?? []).map(cellOf))]]),
    );
    const frozen = await this.control.freezePool({ evolutionId: this.prepared.evolutionId, siblings, targets: targetWords, effect });
    this.status.phase = 'done';
    return frozen;
  }

  /** Why each direction without a sibling has none. */
  private withoutSibling({ measured, siblingIds }: Measurement): EvolutionResult['withoutSibling'] {
    return this.prepared.config.directions.flatMap((direction) => {
      if (this.withoutTargets.includes(direction))
        return [{ direction, reason: 'the base harness showed no failure this direction repairs on the dev tasks' }];
      const result = this.best[direction] ?? null;
      if (result === null) return [{ direction, reason: 'no candidate was accepted (see the recorded proposals)' }];
      if (!beatsBase(result))
        return [
          {
            direction,
            reason: `the best candidate ${result.candidateId} rescued ${result.targetRescueRate.toFixed(3)} of its targets, not above the base's ${result.baseRateOnTargets.toFixed(3)}`,
          },
        ];
      const fresh = measured.find((m) => m.chosen.candidateId === result.candidateId)!.fresh;
      if (!siblingIds.has(result.candidateId)) {
        return [
          {
            direction,
            reason: `the best candidate ${result.candidateId} rescued ${fresh.targetRescueRate.toFixed(3)} of its targets on fresh rollouts, not above the base's ${fresh.baseRateOnTargets.toFixed(3)} (${result.targetRescueRate.toFixed(3)} in its validation)`,
          },
        ];
      }
      return [];
    });
  }

  /** The evolution's result: the frozen pool, its siblings, the directions without one, the plan and the effect. */
  private resultOf(measurement: Measurement, frozen: { poolHash: string; dir: string }): EvolutionResult {
    const { prepared, diagnosis } = this;
    const { siblings, effect } = measurement;
    const result: EvolutionResult = {
      evolutionId: prepared.evolutionId,
      env: prepared.env,
      simulated: prepared.simulated,
      pool: frozen.poolHash,
      dir: frozen.dir,
      base: prepared.baseId,
      siblings: siblings.map((s) => ({
        id: s.candidateId,
        direction: s.direction,
        parent: s.parent,
        bornRound: s.round,
        targetRescueRate: s.targetRescueRate,
        baseRateOnTargets: s.baseRateOnTargets,
        validationRescueRate: s.validationRescueRate,
        difference: s.difference,
        regressionRate: s.regressionRate,
        targets: (diagnosis.targets[s.direction] ?? []).length,
      })),
      withoutSibling: this.withoutSibling(measurement),
      plan: this.plan,
      devTasks: prepared.devTasks.length,
      baseDevSuccess: diagnosis.baseSuccess,
      effect,
    };
    this.show(`frozen pool ${frozen.poolHash}: ${siblings.length} siblings`);
    return result;
  }

  /** One rollout group (`rolloutsPerTask` rollouts of a harness on a task), counted in the plan and the status. */
  private async group(phase: string, candidateId: string, taskId: string): Promise<EvolutionGroup> {
    const { status, plan } = this;
    const { config, evolutionId } = this.prepared;
    status.groupsStarted += 1;
    plan.groups[phase] = (plan.groups[phase] ?? 0) + 1;
    plan.rollouts[phase] = (plan.rollouts[phase] ?? 0) + config.rolloutsPerTask;
    const result = await this.rollout.runEvolutionGroup({ evolutionId, phase, candidateId, taskId, samples: config.rolloutsPerTask });
    status.groupsDone += 1;
    this.show(phaseLine(status));
    return result;
  }

  /** The evolution's current details in the Web UI. */
  private show(what: string): void {
    setCurrentDetails(details(this.status, what));
  }
}

function parentResultsOf(r: CandidateResult) {
  return {
    targetRescueRate: r.targetRescueRate,
    baseRateOnTargets: r.baseRateOnTargets,
    regressionRate: r.regressionRate,
    byKind: Object.fromEntries(Object.entries(r.byKind).map(([kind, t]) => [kind, t.rollouts ? t.successes / t.rollouts : 0])),
  };
}
