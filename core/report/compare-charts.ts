/**
 * The Vega-Lite specs of the compare report: curves over the seeds of each
 * arm, spend curves, the final eval-split success and the differences between
 * arms. Pure: data in, spec out; vega.ts renders them.
 */
import { chart, type Chart, HEIGHT, LEGEND_BELOW, PERCENT_AXIS, STEP_AXIS, WIDTH } from './chart';

/** One point of a curve over steps, summarised over the seeds of an arm. */
export interface SeedBandPoint {
  arm: string;
  step: number;
  mean: number;
  min: number;
  max: number;
  /** Seeds that recorded this step. */
  seeds: number;
}

/** Per arm and step: mean, min and max over the seeds' values (a seed without the step is left out of it). */
export function bandOverSeeds(curves: Record<string, ReadonlyArray<ReadonlyArray<{ step: number; value: number }>>>): SeedBandPoint[] {
  return Object.entries(curves).flatMap(([arm, seeds]) => {
    const bySteps = new Map<number, number[]>();
    for (const curve of seeds) for (const { step, value } of curve) (bySteps.get(step) ?? bySteps.set(step, []).get(step)!).push(value);
    return [...bySteps.entries()]
      .sort(([a], [b]) => a - b)
      .map(([step, values]) => ({
        arm,
        step,
        seeds: values.length,
        mean: values.reduce((n, v) => n + v, 0) / values.length,
        min: Math.min(...values),
        max: Math.max(...values),
      }));
  });
}

/** An arm's curve over steps: the mean over seeds as a line, the min–max over seeds as a band. */
export function seedBandChart(args: {
  id: string;
  title: string;
  measure: string;
  points: readonly SeedBandPoint[];
  arms: readonly string[];
  simulated: boolean;
}): Chart {
  // One legend for band and line; its symbols opaque, not as faint as the band.
  const color = { field: 'arm', type: 'nominal', sort: [...args.arms], legend: { ...LEGEND_BELOW, symbolOpacity: 1 } } as const;
  const seedCounts = [...new Set(args.points.map((p) => p.seeds))].sort((a, b) => a - b).join(' or ');
  return chart(
    args.id,
    args.title,
    args.points.length === 0
      ? 'No step of any arm is stored.'
      : `${args.measure} at each step: the line is the mean over the arm's seeds (${seedCounts} per step), the band spans their minimum to maximum.`,
    args.simulated,
    args.points.length === 0
      ? null
      : {
          width: WIDTH,
          height: HEIGHT,
          data: { values: [...args.points] },
          encoding: { x: { field: 'step', type: 'quantitative', axis: STEP_AXIS, title: 'step' } },
          layer: [
            {
              mark: { type: 'area', opacity: 0.18 },
              encoding: {
                y: { field: 'min', type: 'quantitative', scale: { domain: [0, 1] }, axis: PERCENT_AXIS, title: null },
                y2: { field: 'max' },
                color,
              },
            },
            {
              mark: { type: 'line', point: true },
              encoding: { y: { field: 'mean', type: 'quantitative' }, color },
            },
          ],
        },
  );
}

/** One run's value at a cumulative spend: a point of `spendCurveChart`. */
export interface SpendPoint {
  arm: string;
  seed: string;
  spent: number;
  value: number;
}

/**
 * A figure against what was spent to reach it (cumulative rollouts or tokens):
 * one line per run, coloured by arm, so arms that spend at different rates
 * compare at equal cost.
 */
export function spendCurveChart(args: {
  id: string;
  title: string;
  measure: string;
  spentTitle: string;
  points: readonly SpendPoint[];
  arms: readonly string[];
  simulated: boolean;
}): Chart {
  return chart(
    args.id,
    args.title,
    args.points.length === 0
      ? 'No step of any arm recorded what it spent.'
      : `${args.measure} at each step, against ${args.spentTitle} up to and including that step: one line per run (arm and seed).`,
    args.simulated,
    args.points.length === 0
      ? null
      : {
          width: WIDTH,
          height: HEIGHT,
          data: { values: [...args.points] },
          mark: { type: 'line', point: true, opacity: 0.8 },
          encoding: {
            x: { field: 'spent', type: 'quantitative', title: args.spentTitle },
            y: { field: 'value', type: 'quantitative', scale: { domain: [0, 1] }, axis: PERCENT_AXIS, title: null },
            color: { field: 'arm', type: 'nominal', sort: [...args.arms], legend: LEGEND_BELOW },
            detail: { field: 'seed', type: 'nominal' },
          },
        },
  );
}

/** The final eval-split success of every run of a compare: one point per seed, ±1 standard error within the run, and the arm's mean. */
export function evalEndChart(
  runs: ReadonlyArray<{ arm: string; seed: string; success: number; stdErr: number }>,
  arms: readonly string[],
  simulated: boolean,
): Chart {
  const values = runs.map((r) => ({ ...r, lo: Math.max(0, r.success - r.stdErr), hi: Math.min(1, r.success + r.stdErr) }));
  const x = { field: 'arm', type: 'nominal', sort: [...arms], title: null, axis: { labelAngle: 0 } } as const;
  const y = (field: string) => ({
    field,
    type: 'quantitative' as const,
    scale: { domain: [0, 1] },
    axis: PERCENT_AXIS,
    title: 'base-harness success at the end',
  });
  return chart(
    'eval-end',
    'Eval-split success at the end, base harness, per arm and seed',
    runs.length === 0
      ? 'No run of this compare finished.'
      : "Each point is one seed's run, with ±1 standard error of its success rate over its final evaluation's base-harness rollouts; the black tick is the arm's mean over seeds.",
    simulated,
    runs.length === 0
      ? null
      : {
          width: WIDTH,
          height: HEIGHT,
          data: { values },
          layer: [
            {
              mark: { type: 'rule', strokeWidth: 1.5 },
              encoding: {
                x,
                xOffset: { field: 'seed', type: 'nominal' },
                y: y('lo'),
                y2: { field: 'hi' },
                color: { field: 'seed', type: 'nominal', title: 'seed' },
              },
            },
            {
              mark: { type: 'point', filled: true, size: 60 },
              encoding: {
                x,
                xOffset: { field: 'seed', type: 'nominal' },
                y: y('success'),
                color: { field: 'seed', type: 'nominal', title: 'seed' },
              },
            },
            {
              mark: { type: 'tick', color: 'black', thickness: 2, size: 40 },
              encoding: { x, y: { ...y('success'), aggregate: 'mean' } },
            },
          ],
        },
  );
}

/** A difference between two arms of one figure, with its confidence interval. */
export interface ArmDifference {
  pair: string;
  figure: string;
  mean: number;
  lo: number;
  hi: number;
  excludesZero: boolean;
}

/** The differences of the rate figures as intervals around their mean, against 0. */
export function differenceChart(differences: readonly ArmDifference[], ciMethod: string, simulated: boolean): Chart {
  const values = differences.map((d) => ({ ...d, significance: d.excludesZero ? 'interval excludes 0' : 'interval includes 0' }));
  const figures = [...new Set(differences.map((d) => d.figure))];
  return chart(
    'differences',
    'Differences between arms, with confidence intervals',
    differences.length === 0
      ? 'No pair of arms to compare (fewer than two arms finished).'
      : `Mean difference over the seeds both arms finished (A - B: arm A's figure minus arm B's), with its confidence interval (${ciMethod}); filled: the interval excludes 0.`,
    simulated,
    differences.length === 0
      ? null
      : {
          data: { values },
          columns: 2,
          facet: { field: 'figure', type: 'nominal', sort: figures, title: null, header: { labelFontWeight: 'bold' } },
          spec: {
            width: 240,
            height: { step: 26 },
            encoding: { y: { field: 'pair', type: 'nominal', title: null } },
            layer: [
              { mark: { type: 'rule', color: '#888', strokeDash: [4, 3] }, encoding: { x: { datum: 0, type: 'quantitative' } } },
              {
                mark: { type: 'rule', strokeWidth: 2 },
                encoding: { x: { field: 'lo', type: 'quantitative', title: 'difference', axis: { format: '+.0%' } }, x2: { field: 'hi' } },
              },
              {
                mark: { type: 'point', size: 70 },
                encoding: {
                  x: { field: 'mean', type: 'quantitative' },
                  fill: {
                    field: 'significance',
                    type: 'nominal',
                    scale: { domain: ['interval excludes 0', 'interval includes 0'], range: ['#1f77b4', 'white'] },
                    legend: LEGEND_BELOW,
                  },
                  stroke: { value: '#1f77b4' },
                },
              },
            ],
          },
          resolve: { scale: { x: 'independent' } },
        },
  );
}
