/**
 * The effect matrix of an evolved pool: the success rate of every harness on
 * every cell (task kind x the base's failure type) of the dev tasks the base
 * failed, and what it says about the pool:
 * - a sibling *helps* a cell when its success there is above the base's with
 *   95% confidence: the difference paired by task, its t interval over the
 *   cell's tasks wholly above 0 (rollouts of one task are not independent, so
 *   tasks are the unit; a cell of one task cannot show it);
 * - locality: some sibling helps a cell, and none helps every cell (a repair
 *   acts where its direction's failures are; a sibling whose gain is spread
 *   too thin to show in any one cell does not count against it);
 * - complementarity: the siblings together help more cells than the best one
 *   alone (so routing between them pays).
 * Pure: the workflow calls it.
 */
import { pairedDifference, type PairedDifference } from '../stats';
import type { EvolutionGroup, TargetTask } from './diagnosis';

export interface Tally {
  rollouts: number;
  successes: number;
}

export interface PoolEffect {
  /** `kind/failureType`, sorted. */
  cells: string[];
  base: string;
  harnesses: string[];
  /** harness -> cell -> rollouts and successes. */
  success: Record<string, Record<string, Tally>>;
  /** sibling -> cell -> its success minus the base's, paired by task, with the 95% t interval over the cell's tasks. */
  difference: Record<string, Record<string, PairedDifference>>;
  /** sibling -> cells it helps. */
  helps: Record<string, string[]>;
  locality: boolean;
  complementarity: { unionCells: number; bestSingleCells: number; shown: boolean };
}

export const cellOf = (t: Pick<TargetTask, 'kind' | 'failureType'>) => `${t.kind}/${t.failureType}`;

export const rateOf = (t: Tally | undefined) => (t && t.rollouts ? t.successes / t.rollouts : 0);

export function measurePoolEffect(args: {
  targets: readonly TargetTask[];
  base: string;
  siblings: readonly string[];
  /** The base's groups and each sibling's, on the targets. */
  groups: readonly EvolutionGroup[];
}): PoolEffect {
  const cellByTask = new Map(args.targets.map((t) => [t.taskId, cellOf(t)]));
  const cells = [...new Set(cellByTask.values())].sort();
  const harnesses = [args.base, ...args.siblings];
  const success: PoolEffect['success'] = Object.fromEntries(
    harnesses.map((h) => [h, Object.fromEntries(cells.map((c) => [c, { rollouts: 0, successes: 0 }]))]),
  );
  for (const g of args.groups) {
    const cell = cellByTask.get(g.taskId);
    const row = success[g.candidateId];
    if (!cell || !row) continue;
    row[cell].rollouts += g.rollouts;
    row[cell].successes += g.successes;
  }
  const taskRate = (harness: string, taskId: string) => {
    const g = args.groups.filter((x) => x.candidateId === harness && x.taskId === taskId);
    const n = g.reduce((a, x) => a + x.rollouts, 0);
    return n ? g.reduce((a, x) => a + x.successes, 0) / n : 0;
  };
  const difference = Object.fromEntries(
    args.siblings.map((s) => [
      s,
      Object.fromEntries(
        cells.map((c) => {
          const tasks = args.targets.filter((t) => cellOf(t) === c).map((t) => t.taskId);
          return [
            c,
            pairedDifference(
              tasks.map((id) => taskRate(s, id)),
              tasks.map((id) => taskRate(args.base, id)),
            ),
          ];
        }),
      ),
    ]),
  );
  const helps = Object.fromEntries(
    args.siblings.map((s) => [s, cells.filter((c) => difference[s][c].excludesZero && difference[s][c].lo > 0)]),
  );
  const counts = Object.values(helps).map((list) => list.length);
  const unionCells = new Set(Object.values(helps).flat()).size;
  const bestSingleCells = counts.length ? Math.max(...counts) : 0;
  return {
    cells,
    base: args.base,
    harnesses,
    success,
    difference,
    helps,
    locality: counts.some((n) => n > 0) && counts.every((n) => n < cells.length),
    complementarity: { unionCells, bestSingleCells, shown: unionCells > bestSingleCells },
  };
}
