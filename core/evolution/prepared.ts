/**
 * What crosses from the evolution's activities to its workflow: the prepared
 * evolution and a proposal's outcome (types only, so the workflow may import them).
 */
import type { EvolutionConfig } from './config';
import type { FailureDirections } from './failure-directions';
import type { CandidateRef } from './selection';

export interface PreparedEvolution {
  evolutionId: string;
  config: EvolutionConfig;
  env: string;
  simulated: boolean;
  devTasks: Array<{ taskId: string; kind: string }>;
  baseId: string;
  baseVersion: string;
  /** failure type -> the directions it calls for, as this evolution maps them. */
  failureDirections: FailureDirections;
}

export type ProposalOutcome =
  { status: 'accepted'; candidate: CandidateRef; attempts: number } | { status: 'dropped'; slot: number; reason: string; attempts: number };
