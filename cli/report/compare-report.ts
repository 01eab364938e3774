/**
 * A compare as one self-contained HTML page: per arm, base-harness success
 * and live-group fraction over steps (mean over seeds with their min–max
 * band, from the run store), every run's final eval-split success, and the
 * differences between arms with their confidence intervals.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { RunStore } from '../../core/store/run-store';
import { budgetText, type CompareResult } from '../compare';
import {
  bandOverSeeds,
  differenceChart,
  evalEndChart,
  seedBandChart,
  spendCurveChart,
  type ArmDifference,
  type SpendPoint,
} from '../../core/report/compare-charts';
import type { Chart } from '../../core/report/chart';
import { stepSpend, type StepSpend } from '../../core/rl/step-summary';
import { chartSections, renderPage, type PageSection, type Table } from '../../core/report/html';

/** Figures that are shares (differences shown in percentage points); the others are counts. */
const RATE_FIGURES = new Set(['baseSuccessEnd', 'rank1SuccessEnd', 'liveGroupFraction', 'rescueRate']);

const FIGURE_NAMES: Record<string, string> = {
  baseSuccessEnd: 'base-harness success at the end',
  rank1SuccessEnd: 'Rank-1 success at the end',
  liveGroupFraction: 'live-group fraction',
  rescueRate: 'rescue rate',
  extraRollouts: 'extra rollouts',
  trainingSeconds: 'training wall-clock seconds',
};

const figureName = (figure: string) => FIGURE_NAMES[figure] ?? figure;
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

function signed(figure: string, x: number): string {
  const sign = x > 0 ? '+' : '';
  return RATE_FIGURES.has(figure) ? `${sign}${(x * 100).toFixed(1)} pts` : `${sign}${x.toFixed(1)}`;
}

/** The arms in the compare's order, then any that only have runs. */
function armOrder(result: CompareResult): string[] {
  return [...new Set([...Object.keys(result.arms), ...Object.keys(result.runs)])];
}

export function armDifferences(result: CompareResult): ArmDifference[] {
  return Object.entries(result.diffs).flatMap(([pair, figures]) =>
    Object.entries(figures).map(([figure, d]) => ({ pair, figure, mean: d.mean, lo: d.lo, hi: d.hi, excludesZero: d.excludesZero })),
  );
}

function differenceTable(result: CompareResult): Table {
  return {
    header: ['difference', 'figure', 'mean', 'confidence interval', 'excludes 0', 'seeds paired'],
    numeric: [2, 3, 5],
    rows: Object.entries(result.diffs).flatMap(([pair, figures]) =>
      Object.entries(figures).map(([figure, d]) => [
        pair,
        figureName(figure),
        signed(figure, d.mean),
        d.n < 2 ? 'none (fewer than 2 seeds)' : `[${signed(figure, d.lo)}, ${signed(figure, d.hi)}]`,
        d.excludesZero ? 'yes' : 'no',
        String(d.n),
      ]),
    ),
  };
}

function armTable(result: CompareResult, arms: readonly string[]): Table {
  return {
    header: [
      'arm',
      'seeds finished',
      'base success end',
      '± SE within a run',
      'Rank-1 end',
      'live groups',
      'rescue rate',
      'extra rollouts',
      'training s',
      'steps',
      'rollouts',
      'policy tokens',
      'trainer tokens',
      'GPU-s (SIMULATED)',
    ],
    numeric: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
    rows: arms
      .filter((arm) => result.arms[arm])
      .map((arm) => {
        const f = result.arms[arm];
        return [
          arm,
          String(Object.keys(result.runs[arm] ?? {}).length),
          pct(f.baseSuccessEnd),
          pct(f.baseSuccessEndStdErr),
          pct(f.rank1SuccessEnd),
          pct(f.liveGroupFraction),
          pct(f.rescueRate),
          f.extraRollouts.toFixed(0),
          (f.trainingSeconds ?? 0).toFixed(1),
          f.steps.toFixed(1),
          f.spend.rollouts.toFixed(0),
          f.spend.policyTokens.toFixed(0),
          f.spend.trainerTokens.toFixed(0),
          f.spend.gpuSeconds?.toFixed(1) ?? '-',
        ];
      }),
  };
}

function runTable(result: CompareResult, arms: readonly string[]): Table {
  const rows = arms.flatMap((arm) =>
    Object.entries(result.runs[arm] ?? {}).map(([seed, r]) => [
      arm,
      seed,
      r.runId,
      pct(r.baseSuccessEnd),
      pct(r.rank1SuccessEnd),
      pct(r.liveGroupFraction),
      'finished',
    ]),
  );
  const failed = result.failures.map((f) => [f.arm, String(f.seed), f.runId, '-', '-', '-', `FAILED: ${f.error}`]);
  return {
    header: ['arm', 'seed', 'run id', 'base success end', 'Rank-1 end', 'live groups', ''],
    numeric: [3, 4, 5],
    rows: [...rows, ...failed],
  };
}

type CurveStep = {
  step: number;
  baseSuccessRate: number;
  liveGroupFraction: number;
  baseRollouts: number;
  rescueRollouts: number;
  spend?: StepSpend;
};

/** Each run's base success against its cumulative spend (`pick` of each step's). */
function spendPoints(curves: Record<string, Array<{ seed: string; steps: CurveStep[] }>>, pick: (s: StepSpend) => number): SpendPoint[] {
  return Object.entries(curves).flatMap(([arm, runs]) =>
    runs.flatMap(({ seed, steps }) => {
      let spent = 0;
      return steps.map((s) => ({ arm, seed, spent: (spent += pick(stepSpend(s))), value: s.baseSuccessRate }));
    }),
  );
}

/** The charts of a compare; `curves` holds each finished run's steps, by arm, one entry per seed. */
export function compareCharts(result: CompareResult, curves: Record<string, Array<{ seed: string; steps: CurveStep[] }>>): Chart[] {
  const arms = armOrder(result);
  const over = (pick: (s: { baseSuccessRate: number; liveGroupFraction: number }) => number) =>
    bandOverSeeds(
      Object.fromEntries(
        Object.entries(curves).map(([arm, runs]) => [arm, runs.map(({ steps }) => steps.map((s) => ({ step: s.step, value: pick(s) })))]),
      ),
    );
  const tokens = spendPoints(curves, (s) => s.promptTokens + s.completionTokens);
  const endRuns = arms.flatMap((arm) =>
    Object.entries(result.runs[arm] ?? {}).map(([seed, r]) => ({ arm, seed, success: r.baseSuccessEnd, stdErr: r.baseSuccessEndStdErr })),
  );
  return [
    seedBandChart({
      id: 'base-success',
      title: 'Base-harness success per step, per arm',
      measure: "Share of the step's base-harness rollouts that succeeded",
      points: over((s) => s.baseSuccessRate),
      arms,
      simulated: result.simulated,
    }),
    seedBandChart({
      id: 'live-groups',
      title: 'Live-group fraction per step, per arm',
      measure: "Share of the step's training groups with a non-zero advantage",
      points: over((s) => s.liveGroupFraction),
      arms,
      simulated: result.simulated,
    }),
    spendCurveChart({
      id: 'success-by-rollouts',
      title: 'Base-harness success per step, against rollouts spent',
      measure: "Share of the step's base-harness rollouts that succeeded",
      spentTitle: 'rollouts spent (base, rescue and refills)',
      points: spendPoints(curves, (s) => s.rollouts),
      arms,
      simulated: result.simulated,
    }),
    spendCurveChart({
      id: 'success-by-tokens',
      title: 'Base-harness success per step, against policy tokens spent',
      measure: "Share of the step's base-harness rollouts that succeeded",
      spentTitle: 'policy tokens spent (prompt + completion)',
      points: tokens.some((p) => p.spent > 0) ? tokens : [],
      arms,
      simulated: result.simulated,
    }),
    evalEndChart(endRuns, arms, result.simulated),
    differenceChart(
      armDifferences(result)
        .filter((d) => RATE_FIGURES.has(d.figure))
        .map((d) => ({ ...d, figure: figureName(d.figure) })),
      result.ciMethod,
      result.simulated,
    ),
  ];
}

export async function compareReportPage(
  result: CompareResult,
  curves: Parameters<typeof compareCharts>[1],
  generatedAt = new Date(),
): Promise<string> {
  const arms = armOrder(result);
  const finished = arms.reduce((n, arm) => n + Object.keys(result.runs[arm] ?? {}).length, 0);
  const sections: PageSection[] = await chartSections(compareCharts(result, curves));
  sections.push(
    {
      kind: 'table',
      id: 'difference-table',
      title: 'Differences between arms, every figure',
      caption: `A - B is arm A's figure minus arm B's, paired by seed (the arms of a seed train on the same tasks and evaluate on the same eval split); ${result.ciMethod}.`,
      table: differenceTable(result),
    },
    {
      kind: 'table',
      id: 'arms',
      title: 'Arms (means over seeds)',
      caption: "Success on the eval split after the last step; ± SE: the mean over seeds of each run's binomial standard error.",
      table: armTable(result, arms),
    },
    {
      kind: 'table',
      id: 'runs',
      title: 'Runs',
      caption: '`harness-s report RUN` writes the full report of any of them.',
      table: runTable(result, arms),
    },
  );
  return renderPage({
    title: `Harness-S compare: ${arms.join(' vs ')}`,
    simulated: result.simulated,
    facts: [
      ['arms', arms.join(', ')],
      ['seeds', result.seeds.join(', ')],
      ['spend', result.budget ? `each arm trained until it spent ${budgetText(result.budget)}` : 'each arm trained the same steps'],
      ['runs', `${finished} finished${result.failures.length ? `, ${result.failures.length} failed` : ''}`],
      ['curves over steps', 'mean over seeds, band from the minimum to the maximum over seeds'],
      ['differences', result.ciMethod],
    ],
    sections,
    generatedAt,
  });
}

/** Writes the compare's report to `dir/index.html`, reading each finished run's steps from the store; returns that path. */
export async function writeCompareReport(options: { store: RunStore; result: CompareResult; dir: string }): Promise<string> {
  const { store, result } = options;
  const curves: Parameters<typeof compareCharts>[1] = {};
  for (const arm of armOrder(result)) {
    for (const [seed, run] of Object.entries(result.runs[arm] ?? {})) {
      (curves[arm] ??= []).push({ seed, steps: (await store.steps(run.runId)).map((s) => s.summary) });
    }
  }
  const html = await compareReportPage(result, curves);
  await mkdir(options.dir, { recursive: true });
  const file = path.resolve(options.dir, 'index.html');
  await writeFile(file, html);
  return file;
}
