/**
 * What a harness pool evolution takes, returns and shows: its input, its
 * result, the status its query answers and the Web UI's text of that status.
 */
import { defineQuery } from '@temporalio/workflow';
import type { EvolutionConfigInput } from '../core/evolution/config';
import type { SiblingDirection } from '../core/evolution/failure-directions';
import type { PoolEffect } from '../core/evolution/effect-matrix';
import type { PairedDifference } from '../core/stats';

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

export function phaseLine(s: EvolutionStatus): string {
  return s.phase === 'evolving' ? `round ${s.round} of ${s.rounds}: proposing and validating` : s.phase;
}

export function details(s: EvolutionStatus, what: string): string {
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
