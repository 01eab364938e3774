/**
 * The trainer ops of one training step and their seq_ids.
 *
 * Tinker makes a retried op exactly-once by the per-model `seq_id` in its
 * body: the same seq_id with the same body returns the same future. Seq ids
 * here are derived from (run, step, op), so a retried activity sends every op
 * under the seq_id it had the first time: the step's ops are numbered on
 * from where the run's previous step on this trainer model ended, in a fixed
 * order, with no gaps (a server may process a model's ops in seq_id order):
 *   forward_backward chunk 0..C-1, optim_step (when there is data),
 *   save_weights_for_sampler, then the forward pass of the publish probe.
 */
export interface StepOpPlan {
  forwardBackward: number[];
  /** null when the step has no data to train on. */
  optimStep: number | null;
  saveWeights: number;
  probeForward: number;
  /** The last seq_id the step uses; the next step starts after it. */
  last: number;
}

/**
 * `previousLast`: the last seq_id of the run's previous step on the same
 * trainer model (0 for a model's first step).
 */
export function planStepOps(previousLast: number, chunks: number): StepOpPlan {
  let next = previousLast;
  const forwardBackward = Array.from({ length: chunks }, () => ++next);
  const optimStep = chunks > 0 ? ++next : null;
  const saveWeights = ++next;
  const probeForward = ++next;
  return { forwardBackward, optimStep, saveWeights, probeForward, last: next };
}
