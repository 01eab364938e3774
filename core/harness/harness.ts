/**
 * A harness: the scaffold around the policy. The runtime drives any
 * environment through these hooks; envs build their pool from their own specs.
 */
import type { RepairDirection } from './direction';
import type { TaskRef } from '../envs/environment';

export type ActionRealization =
  | { ok: true; action: string; repaired: boolean }
  | { ok: false; error: string };

export interface Harness {
  readonly id: string;
  readonly parent: string | null;
  readonly direction: RepairDirection;
  readonly description: string;
  systemPrompt(task: TaskRef): string;
  /** Actions the harness performs itself before the policy's first turn (scaffolded). */
  scaffoldActions(task: TaskRef): string[];
  /** Turns the text of an assistant turn into an env action, or says why it cannot. */
  realizeAction(text: string): ActionRealization;
  /** The turn budget under this harness, given the run's max turns. */
  turnBudget(maxTurns: number): number;
}

export function harnessSummary(harness: Harness) {
  return { id: harness.id, parent: harness.parent, direction: harness.direction, description: harness.description };
}
export type HarnessSummary = ReturnType<typeof harnessSummary>;
