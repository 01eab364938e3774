/**
 * What the harness runtime needs of an environment. Each env implements it
 * (core/envs/registration.ts says how an env joins); the runtime, the router and the workflows see only this.
 */
import type { ChatMessage, FailureType, ToolDefinition } from '../policy/trajectory';
import type { Harness } from './harness';
import type { TaskRef } from './task';

export interface StepOutcome {
  observation: string;
  /** How the env judged the observation, for harness hints; 'ok' when absent. */
  kind?: 'ok' | 'error' | 'empty';
  done: boolean;
  /** Set when done. */
  success?: boolean;
  reward?: number;
  failureType?: FailureType | null;
}

export interface Episode {
  readonly task: TaskRef;
  /** The first user message: the task as the agent sees it. */
  instruction(): string;
  /**
   * The env protocol's own opening turns, when it has more than the task
   * message (AgentBench: its instruction, the agent's "Ok.", then the task).
   */
  opening?(): ChatMessage[];
  /**
   * Tools the policy calls through the OpenAI tools API (SWE); none: the
   * policy answers in text. A tool call reaches `step` as the text
   * `{"tool": name, "arguments": {...}}` (toolCallAction).
   */
  tools?(): ToolDefinition[];
  /**
   * The outcome when the policy runs out of turns without ending the episode,
   * for envs that score what was done so far (SWE scores the workspace's
   * diff, as SWE-bench does); a turn_limit failure with reward 0 when absent.
   */
  outOfTurns?(): Promise<StepOutcome>;
  /** Executes one action; `byHarness` marks actions the harness performs itself (scaffolded). */
  step(action: string, options?: { byHarness?: boolean }): Promise<StepOutcome>;
  /** Ends the episode; safe to call twice. */
  close(): Promise<void>;
}

export interface Environment {
  readonly id: string;
  /** Every task the env offers, in a stable order. */
  listTasks(): TaskRef[];
  /** The task as the agent would see it, without starting an episode (for voter LLMs). */
  describeTask(taskId: string): string;
  /** The harness pool the env defines: base first, then the siblings. */
  harnesses(): Harness[];
  /** `signal`: the episode's commands stop when it aborts (an activity cancelled). */
  startEpisode(taskId: string, options: { maxTurns: number; signal?: AbortSignal }): Promise<Episode>;
  /** Releases what the env holds (connection pools); the env is not used after. */
  close?(): Promise<void>;
}
