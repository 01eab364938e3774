/** The HTML reports of a run and of a compare: charts from stored data, inline SVG, nothing loaded from outside. */
import { bandOverSeeds } from '../../core/report/compare-charts';
import { trainerMetricPanel } from '../../core/report/run-charts';
import { compareCharts, compareReportPage } from '../../cli/report/compare-report';
import { runReportCharts, runReportPage } from '../../core/report/run-report';
import { renderSvg } from '../../core/report/vega';
import { compareCurves, compareResult, runReportData } from './report-fixtures';

/** chart id -> the figure's HTML (its SVG and caption). */
function figures(html: string): Map<string, string> {
  return new Map([...html.matchAll(/<figure id="([^"]+)"[^>]*>([\s\S]*?)<\/figure>/g)].map((m) => [m[1], m[2]]));
}

/** Every place the page would load something from: src/href attributes, CSS url() and @import, script and link elements. */
function externalLoads(html: string): string[] {
  return [
    ...html.matchAll(/\b(?:src|href|xlink:href)\s*=\s*["']?\s*(?:https?:)?\/\/[^"'\s>]*/gi),
    ...html.matchAll(/url\(\s*["']?\s*(?:https?:)?\/\/[^)]*\)/gi),
    ...html.matchAll(/@import|<script\b|<link\b|<iframe\b|<object\b|<embed\b/gi),
  ].map((m) => m[0]);
}

let runPage: string;
let comparePage: string;
beforeAll(async () => {
  runPage = await runReportPage(runReportData());
  comparePage = await compareReportPage(compareResult(), compareCurves());
});

test('the run report draws every chart as inline SVG with its marks', () => {
  const charts = figures(runPage);
  expect([...charts.keys()]).toEqual([
    'step-success',
    'evaluation',
    'dead-rescued',
    'rescue-heatmap',
    'router-picks',
    'trainer-metrics',
    'logprob-mismatch',
  ]);
  const marks: Record<string, string[]> = {
    'step-success': ['mark-line', 'mark-symbol', 'base-harness success', 'live-group fraction'],
    evaluation: ['mark-line', 'base harness', 'Rank-1 routing', 'steps trained'],
    'dead-rescued': ['mark-rect', 'dead groups', 'rescued groups'],
    'rescue-heatmap': ['mark-rect', 'mark-text', 'ec-schema', 'tr-budget', 'aggregate', 'lookup'],
    'router-picks': ['mark-rect', 'times chosen', 'not rescued'],
    'trainer-metrics': ['mark-line', 'loss:sum', 'grad_norm', 'optim/step', 'gradient norm'],
    'logprob-mismatch': ['mark-line', 'trainer vs sampler, trained tokens', 'inference server vs trainer, publish probe'],
  };
  for (const [id, expected] of Object.entries(marks)) {
    const figure = charts.get(id)!;
    expect(figure).toMatch(/^\s*<svg /);
    for (const text of expected) expect({ id, text, found: figure.includes(text) }).toEqual({ id, text, found: true });
  }
});

test('the rescue heatmap has one panel per profile version, labelled by the policy it was measured with, cells as the router reads them', () => {
  const heatmap = figures(runPage).get('rescue-heatmap')!;
  expect(heatmap).toContain('v1 · base policy');
  expect(heatmap).toContain('v2 · after step 1');
  // ec-schema on lookup in v1: 6 of 8, shrunk towards the kind's 7/16 with 2 pseudo-attempts: (6 + 2 x 0.4375) / 10.
  expect(heatmap).toContain('69% (8)');
  // Re-anchored: v2 measured tr-budget at 7 of 8 on lookup.
  expect(heatmap).toContain('81% (8)');
});

test('a simulated run is labelled SIMULATED in the page title, the banner, the header and every chart', () => {
  expect(runPage).toMatch(/<title>[^<]*\[SIMULATED\]<\/title>/);
  expect(runPage).toContain('Every number on this page is simulated');
  expect(runPage).toContain('sim (SIMULATED)');
  for (const [id, figure] of figures(runPage)) expect({ id, simulated: figure.includes('>SIMULATED<') }).toEqual({ id, simulated: true });
});

test('a run on a real env carries no SIMULATED label', async () => {
  const page = await runReportPage(runReportData({ env: 'charset', simulated: false }));
  expect(page).not.toContain('SIMULATED');
});

test('the header gives the run id, name, env, steps and the run summary figures', () => {
  for (const text of [
    'run-1',
    'report-test',
    '3 of 3 completed',
    '20.0% at the first step -&gt; 40.0% at the last',
    'base harness 50.0%, Rank-1 routing 62.5% (after 3 steps)',
    'v1, v2',
  ]) {
    expect(runPage).toContain(text);
  }
});

test('both pages load nothing from outside: no script, stylesheet link or http(s) address in a src, href or url()', () => {
  expect(externalLoads(runPage)).toEqual([]);
  expect(externalLoads(comparePage)).toEqual([]);
  expect(runPage).toContain(`default-src 'none'`);
});

test('every chart spec compiles and renders without a Vega-Lite or Vega warning', async () => {
  const charts = [...runReportCharts(runReportData()), ...compareCharts(compareResult(), compareCurves())];
  for (const chart of charts) {
    const { svg, warnings } = await renderSvg(chart.spec!);
    expect({ id: chart.id, warnings }).toEqual({ id: chart.id, warnings: [] });
    expect(svg).toContain('role-mark');
  }
});

test('a run without evaluations, profiles, routing decisions or trainer metrics says so where those charts would be', async () => {
  const data = runReportData();
  const page = await runReportPage({
    ...data,
    evaluations: [],
    profiles: [],
    decisions: [],
    steps: data.steps.map((s) => ({ ...s, trainerMetrics: {}, logprobMismatch: null, publishProbeMeanAbsDiff: null })),
  });
  const charts = figures(page);
  expect(charts.get('step-success')).toMatch(/^\s*<svg /);
  expect(charts.get('evaluation')).toContain('No evaluation is stored for this run');
  expect(charts.get('rescue-heatmap')).toContain('No profile version with per-kind evidence');
  expect(charts.get('router-picks')).toContain('No dead group was routed');
  expect(charts.get('trainer-metrics')).toContain('reported no metrics');
  expect(charts.get('logprob-mismatch')).toContain('No step of this run measured a mismatch');
});

test('text from the run store is escaped, not interpreted', async () => {
  const page = await runReportPage(runReportData({ name: '<img src=x onerror=alert(1)>' }));
  expect(page).not.toContain('<img');
  expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;');
});

test('trainer metrics share a panel with those that measure the same thing, for the sim trainer and for SkyRL; others get their own', () => {
  expect(trainerMetricPanel('loss:sum')).toBe('loss');
  expect(trainerMetricPanel('grad_norm')).toBe('gradient norm');
  expect(trainerMetricPanel('skyrl.ai/grad_norm')).toBe('gradient norm');
  expect(trainerMetricPanel('skyrl.ai/mhc_gradient_norm')).toBe('gradient norm');
  expect(trainerMetricPanel('skyrl.ai/learning_rate')).toBe('learning rate');
  expect(trainerMetricPanel('logprob_mismatch/ratio_max')).toBe('importance ratio (trainer / sampler)');
  expect(trainerMetricPanel('logprob_mismatch/ratio_std')).toBe('logprob_mismatch/ratio_std');
  expect(trainerMetricPanel('optim/step')).toBe('optim/step');
});

test('a curve over seeds is their mean at each step with the min–max band, over the seeds that reached the step', () => {
  const band = bandOverSeeds({
    a: [
      [
        { step: 0, value: 0.2 },
        { step: 1, value: 0.4 },
      ],
      [{ step: 0, value: 0.4 }],
    ],
    b: [[{ step: 0, value: 0.5 }]],
  });
  expect(band).toEqual([
    { arm: 'a', step: 0, seeds: 2, mean: expect.closeTo(0.3, 12), min: 0.2, max: 0.4 },
    { arm: 'a', step: 1, seeds: 1, mean: 0.4, min: 0.4, max: 0.4 },
    { arm: 'b', step: 0, seeds: 1, mean: 0.5, min: 0.5, max: 0.5 },
  ]);
});

test("the compare report draws each arm's curves with a band, the final success per seed, the differences, and says how the band is made", () => {
  const charts = figures(comparePage);
  expect([...charts.keys()]).toEqual([
    'base-success',
    'live-groups',
    'success-by-rollouts',
    'success-by-tokens',
    'eval-end',
    'differences',
  ]);
  for (const id of ['success-by-rollouts', 'success-by-tokens']) {
    expect(charts.get(id)).toContain('mark-line');
    expect(charts.get(id)).toContain('harness-s');
  }
  // At equal cost: the x axis is what each run spent; harness-s seed 2's three steps end at 264 rollouts.
  expect(charts.get('success-by-rollouts')).toContain('rollouts spent');
  expect(charts.get('success-by-rollouts')).toMatch(/aria-label="[^"]*rollouts spent[^"]*: 264;/);
  for (const id of ['base-success', 'live-groups']) {
    expect(charts.get(id)).toContain('mark-area');
    expect(charts.get(id)).toContain('mark-line');
    expect(charts.get(id)).toContain('policy-only');
    expect(charts.get(id)).toContain('harness-s');
  }
  expect(charts.get('eval-end')).toContain('mark-symbol');
  expect(charts.get('differences')).toContain('harness-s - policy-only');
  expect(comparePage).toContain('band from the minimum to the maximum over seeds');
  expect(comparePage).toContain('paired t over seeds, 95%');
});

test('the compare report tabulates every difference with its interval and whether it excludes 0', () => {
  const table = comparePage.slice(comparePage.indexOf('id="difference-table"'));
  expect(table).toContain(
    '<td>harness-s - policy-only</td><td>base-harness success at the end</td><td class="num">+15.0 pts</td><td class="num">[+10.0 pts, +20.0 pts]</td><td>yes</td>',
  );
  expect(table).toContain('<td>extra rollouts</td><td class="num">+16.0</td><td class="num">[+16.0, +16.0]</td><td>no</td>');
});
