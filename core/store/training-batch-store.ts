/**
 * Training steps' batches (training_batch_groups, migration
 * ..._training-batches.sql): written by the step in chunks
 * (storeTrainingBatch), read by the trainer by the step workflow's id
 * (core/rl/training-batch.ts).
 */
import { z } from 'zod';
import type { Pool } from 'pg';
import type { BatchGroup } from '../rl/training-batch';
import { parseRow } from './rows';

const StoredBatchRollouts = z.array(z.object({ harnessId: z.string(), sample: z.number().int(), advantage: z.number() }));

export class TrainingBatchStore {
  constructor(private readonly pool: Pool) {}

  /**
   * Writes `groups` as the batch's groups `first`, `first + 1`, ... in one
   * statement. A group written before under the same index is replaced: a
   * retry writes the same rows, and a step run again after a resume writes
   * what it assembled this time.
   */
  async writeGroups(args: { runId: string; step: number; batchKey: string; first: number; groups: readonly BatchGroup[] }): Promise<void> {
    const { runId, step, batchKey, first, groups } = args;
    if (groups.length === 0) return;
    await this.pool.query(
      `INSERT INTO training_batch_groups (run_id, batch_key, step, group_index, task_id, role, rollouts)
       SELECT $1, $2, $3, $4 + g.ord - 1, g.task_id, g.role, g.rollouts::jsonb
       FROM unnest($5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS g(task_id, role, rollouts, ord)
       ON CONFLICT (run_id, batch_key, group_index) DO UPDATE
         SET step = EXCLUDED.step, task_id = EXCLUDED.task_id, role = EXCLUDED.role, rollouts = EXCLUDED.rollouts, written_at = now()`,
      [runId, batchKey, step, first, groups.map((g) => g.taskId), groups.map((g) => g.role), groups.map((g) => JSON.stringify(g.rollouts))],
    );
  }

  /** The batch's first `count` groups, in batch order (fewer when some were never written). */
  async groups(runId: string, batchKey: string, count: number): Promise<BatchGroup[]> {
    const { rows } = await this.pool.query(
      `SELECT group_index, task_id, role, rollouts FROM training_batch_groups
       WHERE run_id = $1 AND batch_key = $2 AND group_index < $3 ORDER BY group_index`,
      [runId, batchKey, count],
    );
    return rows.map((r) => ({
      taskId: r.task_id,
      role: r.role,
      rollouts: parseRow(
        StoredBatchRollouts,
        r.rollouts,
        `training_batch_groups row (run ${runId}, batch ${batchKey}, group ${r.group_index}): rollouts`,
      ),
    }));
  }
}
