/**
 * Rollout groups: the G rollouts of one task in one step, as the workflows
 * pass them around (small summaries; the trajectories stay in the run store).
 * What happens to a dead group is core/rl/rescue.ts.
 */

export interface RolloutSummary {
  harnessId: string;
  sample: number;
  reward: number;
  success: boolean;
  failureType: string | null;
  turns: number;
  tokens: number;
  /** The inference server's prompt and completion tokens over the episode's turns (absent from rollouts recorded before they were). */
  promptTokens?: number;
  completionTokens?: number;
}

export interface GroupSummary {
  taskId: string;
  kind: string;
  role: 'base' | 'rescue';
  rollouts: RolloutSummary[];
}

/** A group as the trainer gets it: each rollout with its GRPO advantage. */
export interface TrainingGroup {
  taskId: string;
  kind: string;
  role: 'base' | 'rescue';
  rollouts: Array<RolloutSummary & { advantage: number }>;
}
