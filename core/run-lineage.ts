/**
 * A run's lineage: the restores of its trainer model and, for a fork, its
 * parent. The workflow keeps them in its status (workflows/definitions.ts
 * re-exports the types); the run store keeps them for runs that ended.
 */
import type { RunStore } from './store/run-store';

/** A trainer model made anew after the trainer lost it. */
export interface RestoreEvent {
  restore: number;
  /** checkpoint: loaded from the run's latest checkpoint; base: started over from the base model (no checkpoint yet). */
  kind: 'checkpoint' | 'base';
  /** The step whose state was loaded (null: the base). */
  fromStep: number | null;
  /** The step that found the model gone; the steps from fromStep + 1 up to it were re-run. */
  atStep: number;
  /** When the restore completed (ISO 8601). */
  at: string;
  reason: string;
}

/** A fork's parent: the run and the step whose checkpoint it started from. */
export interface ParentRun {
  runId: string;
  step: number;
}

export interface RunLineage {
  /** Restores of the trainer model after the trainer lost it, oldest first. */
  restores: RestoreEvent[];
  /** A fork's parent run and the step it started from; null for a run started anew. */
  parent: ParentRun | null;
}

/** A run's restores and parent as the run store records them (what status shows once the run has ended). */
export async function runLineage(store: RunStore, runId: string): Promise<RunLineage> {
  const run = await store.getRun(runId);
  const restores = (await store.restores(runId))
    .filter((r) => r.kind !== 'fork' && r.status === 'done')
    .map((r): RestoreEvent => ({
      restore: r.restore,
      kind: r.kind === 'base' ? 'base' : 'checkpoint',
      fromStep: r.fromStep,
      atStep: r.atStep,
      at: (r.completedAt ?? r.createdAt).toISOString(),
      reason: r.reason,
    }));
  return { restores, parent: run?.parent ?? null };
}
