/**
 * A harness: the scaffold around the policy. The runtime drives any
 * environment through these hooks; pools come from declarative specs
 * (core/harness/spec.ts) or, for the sim, from its world file.
 */
import type { RepairDirection } from './direction';
import type { TaskRef } from './task';

export type ActionRealization =
  | { ok: true; action: string; repaired: boolean }
  /** retry: the harness refuses this action with feedback and the episode goes on; otherwise it is a format error. */
  | { ok: false; error: string; retry: boolean };

/** What a harness may look at when it handles a turn. */
export interface TurnContext {
  /** 0-based index of the policy turn being handled. */
  turn: number;
  budget: number;
  /** The env actions executed so far, in order. */
  previousActions: readonly string[];
  /** How the env judged the last observation. */
  lastObservationKind: 'ok' | 'error' | 'empty' | null;
}

export interface Harness {
  readonly id: string;
  readonly parent: string | null;
  readonly direction: RepairDirection;
  readonly description: string;
  /** Content hash of the harness definition, when it has one. */
  readonly version?: string;
  /** Empty: no system message. */
  systemPrompt(task: TaskRef): string;
  /** Actions the harness performs itself before the policy's first turn (scaffolded). */
  scaffoldActions(task: TaskRef): string[];
  /** Turns the text of an assistant turn into an env action, or says why it cannot. */
  realizeAction(text: string, context: TurnContext): ActionRealization;
  /** What the policy sees of an observation (truncation, error notes, hints). */
  shapeObservation(observation: string, context: TurnContext): string;
  /** The turn budget under this harness, given the run's max turns. */
  turnBudget(maxTurns: number): number;
}

export function harnessSummary(harness: Harness) {
  return {
    id: harness.id,
    parent: harness.parent,
    direction: harness.direction,
    description: harness.description,
    version: harness.version ?? null,
  };
}
export type HarnessSummary = ReturnType<typeof harnessSummary>;
