/**
 * A training step at cluster scale: its groups split over child workflows
 * (slices), so no history grows past Temporal's 10k-event warning, and its
 * batch written to the run store in chunks, so no payload nears Temporal's
 * 2 MB limit. The sizes are the ones measured with infra/bench/step-scale.ts
 * (docs/temporal.md, "A step at cluster scale").
 *
 * Determinism: the trainingStep workflow calls these functions; a change to
 * what they return for the same input changes the commands a replayed step
 * issues (docs/temporal.md).
 */

/**
 * The most tasks a slice plays. A task costs 3 events (its base group's
 * activity) and 9 when its group is dead (the router's call and the rescue
 * group), plus the workflow tasks that take the results: measured 10 to 13
 * events a task in the 32 slices of a 2,048-task step on the sim (61% of the
 * groups dead, the progress signals included). 256 tasks stay under
 * Temporal's 10k-event warning even at 18 events a task (every group dead,
 * every result in a workflow task of its own).
 */
export const MAX_SLICE_TASKS = 256;

/**
 * Base rollouts per slice by default (and at most). A slice's result holds
 * the summaries of its base and rescue groups, about 165 bytes a rollout:
 * measured 271 KB for 1,024 base rollouts with 65% of the groups rescued, and
 * 119 to 143 KB for 512 (170 KB with every group rescued), well under
 * Temporal's 512 KB payload warning. With G=8 a slice is 64 tasks (640 to 830
 * events measured).
 */
export const DEFAULT_ROLLOUTS_PER_SLICE = 512;

/** Base rollouts per chunk of a batch written to the run store (about 60 bytes each in the activity's input). */
export const BATCH_CHUNK_ROLLOUTS = 2048;

/** How many times a slice tells its step how far it is, at most; its result says the rest. */
export const SLICE_REPORTS = 8;

/** Tasks per slice: as many groups of G as `rolloutsPerSlice` holds, at least one and at most MAX_SLICE_TASKS. */
export function tasksPerSlice(rolloutsPerSlice: number, groupSize: number): number {
  return Math.min(MAX_SLICE_TASKS, Math.max(1, Math.floor(rolloutsPerSlice / groupSize)));
}

/** One slice of a step's tasks: the stream indices [first, first + count). */
export interface SliceRange {
  slice: number;
  first: number;
  count: number;
}

/** A step's `tasks` first tasks cut into slices of `perSlice`, in stream order (the last may be smaller). */
export function sliceRanges(tasks: number, perSlice: number): SliceRange[] {
  if (!Number.isInteger(perSlice) || perSlice < 1) throw new RangeError(`tasks per slice must be a whole number >= 1, not ${perSlice}`);
  const ranges: SliceRange[] = [];
  for (let first = 0, slice = 0; first < tasks; first += perSlice, slice++)
    ranges.push({ slice, first, count: Math.min(perSlice, tasks - first) });
  return ranges;
}

/** Whether a slice that has `done` of its `tasks` base groups done tells its step now: at every 1/SLICE_REPORTS of its tasks. */
export function sliceReportDue(done: number, tasks: number): boolean {
  return done > 0 && done % Math.max(1, Math.ceil(tasks / SLICE_REPORTS)) === 0;
}

/** One chunk of a batch: its groups, the first at index `first` of the batch. */
export interface BatchChunk<T> {
  first: number;
  groups: T[];
}

/**
 * A batch's groups in chunks of at most `maxRollouts` rollouts, in order; a
 * group larger than that is a chunk of its own.
 */
export function batchChunks<T extends { rollouts: readonly unknown[] }>(groups: readonly T[], maxRollouts: number): Array<BatchChunk<T>> {
  const chunks: Array<BatchChunk<T>> = [];
  let rollouts = 0;
  for (const [index, group] of groups.entries()) {
    if (chunks.length === 0 || rollouts + group.rollouts.length > maxRollouts) {
      chunks.push({ first: index, groups: [] });
      rollouts = 0;
    }
    chunks[chunks.length - 1].groups.push(group);
    rollouts += group.rollouts.length;
  }
  return chunks;
}

/**
 * The largest step tested (infra/bench/step-scale.ts on the sim): a config
 * past it is refused (core/config.ts), with the limit and why.
 */
export const STEP_LIMITS = {
  /** Tasks per step (rollout.tasksPerStep): 2,048 x G=8 ran, split over 16 slices. */
  tasksPerStep: 2048,
  /** Base rollouts per step: tasksPerStep x groupSize, or with a refill the most tasks drawn x groupSize. */
  rolloutsPerStep: 16384,
  /** With a refill (sampling.refill) the step is played in one history: the most tasks it may draw (sampling.maxDraws). */
  refillDraws: 512,
} as const;
