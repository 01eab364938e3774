/**
 * The effect matrix of an evolved pool: the success rate of every harness on
 * every cell (task kind x the base's failure type) of the dev tasks the base
 * failed, and what it says about the pool:
 * - a sibling *helps* a cell when its success there is at least HELP_MARGIN
 *   above the base's;
 * - locality: every sibling helps some cells but not all of them (a repair
 *   acts where its direction's failures are);
 * - complementarity: the siblings together help more cells than the best one
 *   alone (so routing between them pays).
 * Pure: the workflow calls it.
 */
import type { EvolutionGroup, TargetTask } from './diagnosis';

export const HELP_MARGIN = 0.25;

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
  helpMargin: number;
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
  const success: PoolEffect['success'] = Object.fromEntries(harnesses.map((h) => [h, Object.fromEntries(cells.map((c) => [c, { rollouts: 0, successes: 0 }]))]));
  for (const g of args.groups) {
    const cell = cellByTask.get(g.taskId);
    const row = success[g.candidateId];
    if (!cell || !row) continue;
    row[cell].rollouts += g.rollouts;
    row[cell].successes += g.successes;
  }
  const helps = Object.fromEntries(
    args.siblings.map((s) => [s, cells.filter((c) => rateOf(success[s][c]) - rateOf(success[args.base][c]) >= HELP_MARGIN)]),
  );
  const counts = Object.values(helps).map((list) => list.length);
  const unionCells = new Set(Object.values(helps).flat()).size;
  const bestSingleCells = counts.length ? Math.max(...counts) : 0;
  return {
    cells,
    base: args.base,
    harnesses,
    success,
    helpMargin: HELP_MARGIN,
    helps,
    locality: counts.length > 0 && counts.every((n) => n > 0 && n < cells.length),
    complementarity: { unionCells, bestSingleCells, shown: unionCells > bestSingleCells },
  };
}
