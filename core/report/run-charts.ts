/**
 * The Vega-Lite specs of the run report, built from what the run store holds.
 * Pure: data in, spec out; vega.ts renders them.
 */
import { profileMatrix, type BehaviorProfiles } from '../router/profiles';
import type { StoredRoutingDecision } from '../store/run-store';
import type { StoredStepSummary } from '../store/rows';
import type { EvaluationSummary } from '../rl/evaluation';
import { picksByProfileVersion } from '../router/picks';
import { chart, type Chart, HEIGHT, LEGEND_BELOW, PERCENT_AXIS, STEP_AXIS, WIDTH } from './chart';

type StepFields = Pick<StoredStepSummary, 'step' | 'baseSuccessRate' | 'liveGroupFraction' | 'deadGroups' | 'rescuedGroups' | 'tasks'>;

/** Base-harness success and live-group fraction at each step. */
export function stepSuccessChart(steps: readonly StepFields[], simulated: boolean): Chart {
  const values = steps.flatMap((s) => [
    { step: s.step, measure: 'base-harness success', value: s.baseSuccessRate },
    { step: s.step, measure: 'live-group fraction', value: s.liveGroupFraction },
  ]);
  return chart(
    'step-success',
    'Base-harness success and live groups per step',
    "Share of the step's base-harness rollouts that succeeded, and share of its training groups (dead groups replaced by their rescue groups) with a non-zero advantage.",
    simulated,
    steps.length === 0
      ? null
      : {
          width: WIDTH,
          height: HEIGHT,
          data: { values },
          mark: { type: 'line', point: true },
          encoding: {
            x: { field: 'step', type: 'quantitative', axis: STEP_AXIS, title: 'step' },
            y: { field: 'value', type: 'quantitative', scale: { domain: [0, 1] }, axis: PERCENT_AXIS, title: null },
            color: { field: 'measure', type: 'nominal', legend: LEGEND_BELOW },
          },
        },
  );
}

/** Eval-split success after each evaluation, under the base harness and under Rank-1 routing. */
export function evaluationChart(
  evaluations: readonly Pick<EvaluationSummary, 'afterSteps' | 'base' | 'rank1'>[],
  simulated: boolean,
): Chart {
  const values = evaluations.flatMap((e) => [
    { afterSteps: e.afterSteps, arm: 'base harness', successRate: e.base.successRate },
    { afterSteps: e.afterSteps, arm: 'Rank-1 routing', successRate: e.rank1.successRate },
  ]);
  return chart(
    'evaluation',
    'Eval-split success: base harness vs Rank-1 routing',
    evaluations.length === 0
      ? 'No evaluation is stored for this run (eval.enabled is off, or the run has not reached one).'
      : 'Held-out tasks, the same at every evaluation; each point is the success rate over every executor rollout of the arm.',
    simulated,
    evaluations.length === 0
      ? null
      : {
          width: WIDTH,
          height: HEIGHT,
          data: { values },
          mark: { type: 'line', point: true },
          encoding: {
            x: { field: 'afterSteps', type: 'quantitative', axis: STEP_AXIS, title: 'steps trained' },
            y: { field: 'successRate', type: 'quantitative', scale: { domain: [0, 1] }, axis: PERCENT_AXIS, title: 'success' },
            color: { field: 'arm', type: 'nominal', sort: ['base harness', 'Rank-1 routing'], legend: LEGEND_BELOW },
          },
        },
  );
}

/** Dead base groups and rescued groups per step, side by side. */
export function deadRescuedChart(steps: readonly StepFields[], simulated: boolean): Chart {
  const values = steps.flatMap((s) => [
    { step: s.step, series: 'dead groups', groups: s.deadGroups },
    { step: s.step, series: 'rescued groups', groups: s.rescuedGroups },
  ]);
  return chart(
    'dead-rescued',
    'Dead and rescued groups per step',
    `A dead group: all G base-harness rollouts of a task failed. Rescued: its rescue group under the router's siblings has a success.${steps[0] ? ` ${steps[0].tasks} tasks per step.` : ''}`,
    simulated,
    steps.length === 0
      ? null
      : {
          width: WIDTH,
          height: HEIGHT,
          data: { values },
          mark: 'bar',
          encoding: {
            x: { field: 'step', type: 'ordinal', axis: { labelAngle: 0 }, title: 'step' },
            xOffset: { field: 'series', type: 'nominal' },
            y: { field: 'groups', type: 'quantitative', axis: { tickMinStep: 1, format: 'd' }, title: 'groups' },
            color: { field: 'series', type: 'nominal', scale: { range: ['#d62728', '#2ca02c'] }, legend: LEGEND_BELOW },
          },
        },
  );
}

/** "v1 · base policy" or "v2 · after step 1": which policy a profile version was measured with. */
export function profileVersionLabel(
  profiles: Pick<BehaviorProfiles, 'version' | 'policyVersion'>,
  steps: readonly Pick<StoredStepSummary, 'step' | 'policyVersion'>[],
): string {
  const trainedBy = steps.find((s) => s.policyVersion === profiles.policyVersion);
  return `v${profiles.version} · ${trainedBy ? `after step ${trainedBy.step}` : 'base policy'}`;
}

/**
 * One sibling x task-kind heatmap per profile version: each sibling's rescue
 * rate on probe tasks the base harness failed, smoothed as the router reads it
 * (`harness-s profiles show`). Side by side, re-anchoring shows as a change.
 */
export function rescueHeatmapChart(versions: ReadonlyArray<{ label: string; profiles: BehaviorProfiles }>, simulated: boolean): Chart {
  const order = versions.map((v) => v.label);
  const values = versions.flatMap(({ label, profiles }) => {
    const matrix = profileMatrix(profiles);
    return matrix.harnesses.flatMap((harness) =>
      matrix.kinds.map((kind) => {
        const cell = matrix.cells[harness][kind];
        return {
          version: label,
          harness,
          kind,
          rescueRate: cell.rescueRate,
          text: `${Math.round(cell.rescueRate * 100)}% (${cell.attempts})${cell.thin ? '*' : ''}`,
        };
      }),
    );
  });
  const priors = [...new Set(versions.map((v) => v.profiles.priorStrength))].join(', ');
  return chart(
    'rescue-heatmap',
    'Sibling rescue rate by task kind, per profile version',
    values.length === 0
      ? 'No profile version with per-kind evidence is stored for this run.'
      : `Rescue rate of each sibling on probe tasks the base harness failed, smoothed towards the kind's rate with a prior of ${priors} pseudo-attempts; (n) attempts, * thin evidence. One panel per profile version (re-anchoring re-measures with the current policy).`,
    simulated,
    values.length === 0
      ? null
      : {
          data: { values },
          columns: 3,
          facet: { field: 'version', type: 'ordinal', sort: order, title: null, header: { labelFontSize: 12, labelFontWeight: 'bold' } },
          spec: {
            width: { step: 78 },
            height: { step: 26 },
            encoding: {
              x: { field: 'kind', type: 'nominal', title: 'task kind', axis: { labelAngle: -30 } },
              y: { field: 'harness', type: 'nominal', title: null },
            },
            layer: [
              {
                mark: 'rect',
                encoding: {
                  color: {
                    field: 'rescueRate',
                    type: 'quantitative',
                    scale: { domain: [0, 1], scheme: 'blues' },
                    legend: { format: '.0%', title: 'rescue rate' },
                  },
                },
              },
              {
                mark: { type: 'text', fontSize: 10 },
                encoding: {
                  text: { field: 'text', type: 'nominal' },
                  color: { condition: { test: 'datum.rescueRate > 0.55', value: 'white' }, value: 'black' },
                },
              },
            ],
          },
        },
  );
}

/** How often the router chose each sibling while each profile version was in force, and how often that rescued. */
export function routerPicksChart(
  decisions: readonly StoredRoutingDecision[],
  labels: ReadonlyMap<number, string>,
  simulated: boolean,
): Chart {
  const picks = picksByProfileVersion(decisions);
  const label = (version: string) => labels.get(Number(version)) ?? `v${version}`;
  const totals = new Map<string, { version: string; harness: string; chosen: number; rescued: number }>();
  for (const [version, byKind] of Object.entries(picks)) {
    for (const byHarness of Object.values(byKind)) {
      for (const [harness, stats] of Object.entries(byHarness)) {
        const total = totals.get(`${version}\u0000${harness}`) ?? { version: label(version), harness, chosen: 0, rescued: 0 };
        total.chosen += stats.chosen;
        total.rescued += stats.rescued;
        totals.set(`${version}\u0000${harness}`, total);
      }
    }
  }
  const values = [...totals.values()].flatMap((t) => [
    { version: t.version, harness: t.harness, outcome: 'rescued (a rescue rollout succeeded)', picks: t.rescued },
    { version: t.version, harness: t.harness, outcome: 'not rescued', picks: t.chosen - t.rescued },
  ]);
  const order = [
    ...new Set(
      Object.keys(picks)
        .sort((a, b) => Number(a) - Number(b))
        .map(label),
    ),
  ];
  return chart(
    'router-picks',
    'Router picks per profile version',
    decisions.length === 0
      ? 'No dead group was routed in this run (no routing decisions stored).'
      : `Times each sibling was chosen for a dead group (k per group) while the profile version was in force, over ${decisions.length} routing decisions; split by whether any of its rescue rollouts succeeded.`,
    simulated,
    decisions.length === 0
      ? null
      : {
          data: { values },
          columns: 3,
          facet: { field: 'version', type: 'ordinal', sort: order, title: null, header: { labelFontSize: 12, labelFontWeight: 'bold' } },
          spec: {
            width: { step: 34 },
            height: 180,
            mark: 'bar',
            encoding: {
              x: { field: 'harness', type: 'nominal', title: null, axis: { labelAngle: -40 } },
              y: { field: 'picks', type: 'quantitative', stack: 'zero', title: 'times chosen', axis: { tickMinStep: 1, format: 'd' } },
              color: {
                field: 'outcome',
                type: 'nominal',
                scale: { range: ['#2ca02c', '#bbbbbb'] },
                sort: 'descending',
                legend: LEGEND_BELOW,
              },
            },
          },
        },
  );
}

/** Metrics that share a panel, by name; the first rule that matches wins. Any other metric has a panel of its own. */
const METRIC_GROUPS: ReadonlyArray<{ group: string; matches: RegExp }> = [
  { group: 'loss', matches: /loss/i },
  { group: 'gradient norm', matches: /grad(ient)?_norm/i },
  { group: 'learning rate', matches: /learning_rate|(^|\/)lr$/i },
  { group: 'importance ratio (trainer / sampler)', matches: /^logprob_mismatch\/ratio_(mean|min|max)$/ },
];

/** Plotted in the mismatch chart, from the step summary. */
const SHOWN_ELSEWHERE = new Set(['logprob_mismatch/mean_abs_diff']);

/** The panel a trainer metric is drawn in: its group's, else its own. */
export function trainerMetricPanel(name: string): string {
  return METRIC_GROUPS.find((g) => g.matches.test(name))?.group ?? name;
}

/**
 * Every numeric metric the trainer reported per step (forward_backward's summed
 * over chunks, then optim_step's, then the trainer/sampler mismatch), one
 * panel per kind of metric with its own scale: the sim trainer reports
 * `loss:sum`, `grad_norm`, `optim/step`; SkyRL `skyrl.ai/grad_norm`,
 * `skyrl.ai/learning_rate`, ...
 */
export function trainerMetricsChart(steps: readonly Pick<StoredStepSummary, 'step' | 'trainerMetrics'>[], simulated: boolean): Chart {
  const values = steps.flatMap((s) =>
    Object.entries(s.trainerMetrics)
      .filter(([name, value]) => Number.isFinite(value) && !SHOWN_ELSEWHERE.has(name))
      .map(([name, value]) => ({ step: s.step, metric: name, panel: trainerMetricPanel(name), value })),
  );
  // The groups first, in their order; then the other metrics by name.
  const groups = METRIC_GROUPS.map((g) => g.group);
  const panels = [...new Set(values.map((v) => v.panel))].sort((a, b) => {
    const [i, j] = [groups.indexOf(a), groups.indexOf(b)].map((k) => (k < 0 ? groups.length : k));
    return i - j || a.localeCompare(b);
  });
  return chart(
    'trainer-metrics',
    'Trainer metrics per step',
    values.length === 0
      ? "The trainer reported no metrics for this run's steps."
      : `What the trainer reported at each step, one panel per kind of metric, each with its own scale: ${panels.join('; ')}.`,
    simulated,
    values.length === 0
      ? null
      : {
          data: { values },
          facet: {
            row: {
              field: 'panel',
              type: 'nominal',
              sort: panels,
              title: null,
              header: { labelOrient: 'top', labelAnchor: 'start', labelAngle: 0, labelAlign: 'left', labelFontWeight: 'bold' },
            },
          },
          spec: {
            width: WIDTH,
            height: 120,
            mark: { type: 'line', point: true },
            encoding: {
              x: { field: 'step', type: 'quantitative', axis: STEP_AXIS, title: 'step' },
              y: { field: 'value', type: 'quantitative', scale: { zero: false }, title: null },
              color: { field: 'metric', type: 'nominal', legend: { title: null } },
            },
          },
          resolve: { scale: { y: 'independent', color: 'independent' } },
        },
  );
}

/** Trainer vs sampler log-probs of the trained tokens, and the inference server vs the trainer on the publish probe. */
export function logprobMismatchChart(
  steps: readonly Pick<StoredStepSummary, 'step' | 'logprobMismatch' | 'publishProbeMeanAbsDiff'>[],
  simulated: boolean,
): Chart {
  const values = steps.flatMap((s) => [
    ...(s.logprobMismatch ? [{ step: s.step, measure: 'trainer vs sampler, trained tokens', value: s.logprobMismatch.meanAbsDiff }] : []),
    ...(s.publishProbeMeanAbsDiff !== null
      ? [{ step: s.step, measure: 'inference server vs trainer, publish probe', value: s.publishProbeMeanAbsDiff }]
      : []),
  ]);
  return chart(
    'logprob-mismatch',
    'Log-prob mismatch per step (mean |Δ log-prob|)',
    values.length === 0
      ? 'No step of this run measured a mismatch (nothing was trained, or the steps were recorded before it was measured).'
      : "Mean absolute difference of log-probs of the same tokens: the trainer's against the sampler's on the tokens trained, and the inference server's against the trainer's on the step's publish probe (the largest over servers). float32 end to end gives ~1e-7; bf16 on GPUs ~1e-2.",
    simulated,
    values.length === 0
      ? null
      : {
          width: WIDTH,
          height: HEIGHT,
          data: { values },
          mark: { type: 'line', point: true },
          encoding: {
            x: { field: 'step', type: 'quantitative', axis: STEP_AXIS, title: 'step' },
            y: { field: 'value', type: 'quantitative', axis: { format: '.1e' }, title: 'mean |Δ log-prob|' },
            color: {
              field: 'measure',
              type: 'nominal',
              sort: ['trainer vs sampler, trained tokens', 'inference server vs trainer, publish probe'],
              legend: LEGEND_BELOW,
            },
          },
        },
  );
}
