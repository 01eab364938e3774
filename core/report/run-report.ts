/**
 * `harness-s report RUN`: a run as one self-contained HTML page of charts,
 * read from the run store: success and live groups per step, evaluations,
 * dead and rescued groups, the profile heatmaps per version, router picks,
 * trainer metrics and the log-prob mismatch.
 */
import { parseStoredRunConfig } from '../config';
import type { EvaluationSummary } from '../rl/evaluation';
import type { RunSpend } from '../rl/step-summary';
import { summarizeRunSteps, type RunSummary } from './run-summary';
import type { BehaviorProfiles } from '../router/profiles';
import type { RunStore, StoredRoutingDecision } from '../store/run-store';
import type { StoredStepSummary } from '../store/rows';
import { UserError } from '../errors';
import { runLineage, type ParentRun, type RestoreEvent } from '../run-lineage';
import {
  deadRescuedChart,
  evaluationChart,
  logprobMismatchChart,
  profileVersionLabel,
  rescueHeatmapChart,
  routerPicksChart,
  stepSuccessChart,
  trainerMetricsChart,
} from './run-charts';
import type { Chart } from './chart';
import { chartSections, renderPage, type Table } from './html';
import { isSimulatedEnv } from '../sim-kind';

export interface RunReportData {
  runId: string;
  name: string;
  env: string;
  simulated: boolean;
  stepsConfigured: number;
  createdAt: Date;
  steps: StoredStepSummary[];
  evaluations: EvaluationSummary[];
  /** Every profile version, oldest first. */
  profiles: BehaviorProfiles[];
  decisions: StoredRoutingDecision[];
  summary: RunSummary;
  /** Restores of the trainer model, and a fork's parent (absent from report data made before they existed). */
  restores?: RestoreEvent[];
  parent?: ParentRun | null;
}

export async function loadRunReport(store: RunStore, runId: string): Promise<RunReportData> {
  const run = await store.getRun(runId);
  if (!run)
    throw new UserError(`no run ${runId} in the run store ($DATABASE_URL selects the database; \`harness-s run list\` shows the runs)`);
  const config = parseStoredRunConfig(run.config, `stored config of run ${runId}`);
  const simulated = isSimulatedEnv(config.env.kind);
  const steps = (await store.steps(runId)).map((s) => s.summary);
  const evaluations = await store.evaluations(runId);
  const profiles: BehaviorProfiles[] = [];
  for (const { version } of await store.profileVersions(runId)) {
    const stored = await store.profiles(runId, version);
    if (stored) profiles.push(stored);
  }
  return {
    runId,
    name: run.name,
    env: config.env.kind,
    simulated,
    stepsConfigured: config.steps,
    createdAt: run.createdAt,
    steps,
    evaluations,
    profiles,
    decisions: await store.routingDecisions(runId),
    ...(await runLineage(store, runId)),
    summary: summarizeRunSteps({ runId, name: run.name, simulated, basePolicy: config.policy.model }, steps, evaluations),
  };
}

export function runReportCharts(data: RunReportData): Chart[] {
  const { steps, simulated } = data;
  const versions = data.profiles.map((profiles) => ({ label: profileVersionLabel(profiles, steps), profiles }));
  return [
    stepSuccessChart(steps, simulated),
    evaluationChart(data.evaluations, simulated),
    deadRescuedChart(steps, simulated),
    rescueHeatmapChart(versions, simulated),
    routerPicksChart(data.decisions, new Map(versions.map((v) => [v.profiles.version, v.label])), simulated),
    trainerMetricsChart(steps, simulated),
    logprobMismatchChart(steps, simulated),
  ];
}

const pct = (x: number | null | undefined) => (x === null || x === undefined ? '-' : `${(x * 100).toFixed(1)}%`);
const reward = (mean: number | null, stdErr: number | null) => (mean === null ? '-' : `${mean.toFixed(3)} ± ${(stdErr ?? 0).toFixed(3)}`);

function spendText(spend: RunSpend): string {
  const gpu = spend.gpuSeconds === null ? '' : `, ${spend.gpuSeconds.toFixed(1)} GPU-seconds (SIMULATED, latency model)`;
  return `${spend.rollouts} rollouts, ${spend.policyTokens} policy tokens (${spend.promptTokens} prompt, ${spend.completionTokens} completion), ${spend.trainerTokens} trainer tokens${gpu}`;
}

/** What the steps' refills drew and dropped (null for a run without refills). */
function refillText(data: RunReportData): string | null {
  const filled = data.steps.flatMap((s) => (s.sampling ? [s.sampling] : []));
  if (filled.length === 0) return null;
  const drawn = filled.reduce((n, f) => n + f.drawn, 0);
  const dropped = filled.reduce((n, f) => n + f.dropped.length, 0);
  return `${filled[0].refill}: ${drawn} tasks drawn over ${filled.length} steps, ${dropped} groups dropped for want of signal`;
}

function runFacts(data: RunReportData): Array<[string, string]> {
  const s = data.summary;
  return [
    ['run id', data.runId],
    ['name', data.name],
    ['env', `${data.env}${data.simulated ? ' (SIMULATED)' : ''}`],
    ['steps', `${s.stepsCompleted} of ${data.stepsConfigured} completed`],
    ['final policy version', s.policyVersion],
    ['base-harness success', `${pct(s.baseSuccessStart)} at the first step -> ${pct(s.baseSuccessEnd)} at the last`],
    ['mean reward (base, ± standard error)', `${reward(s.rewardStart, s.rewardStartStdErr)} -> ${reward(s.rewardEnd, s.rewardEndStdErr)}`],
    ['dead groups', String(s.deadGroups)],
    ['groups rescued', `${s.rescuedGroups} (${s.rescueRollouts} rescue rollouts)`],
    ['live-group fraction', `${pct(s.liveGroupFraction)} (mean over steps)`],
    ...(s.spend ? [['spent', spendText(s.spend)] as [string, string]] : []),
    ...(refillText(data) ? [['refills', refillText(data)!] as [string, string]] : []),
    [
      'eval split at the end',
      s.baseEvalEnd === null
        ? 'not evaluated'
        : `base harness ${pct(s.baseEvalEnd)}, Rank-1 routing ${pct(s.rank1EvalEnd)} (after ${s.evaluations.at(-1)!.afterSteps} steps)`,
    ],
    [
      'trainer/sampler mismatch',
      s.logprobMismatch === null ? '-' : `mean |Δ log-prob| ${s.logprobMismatch.toExponential(2)} over the trained tokens`,
    ],
    ['profile versions', data.profiles.map((p) => `v${p.version}`).join(', ') || '-'],
    ...(data.parent ? [['forked from', `run ${data.parent.runId}, its checkpoint of step ${data.parent.step}`] as [string, string]] : []),
    ['trainer restores', restoresText(data.restores ?? [])],
    ['started', data.createdAt.toISOString()],
  ];
}

function restoresText(restores: RestoreEvent[]): string {
  if (restores.length === 0) return 'none';
  return restores
    .map((r) => {
      const from = r.fromStep === null ? 'the base model (no checkpoint yet)' : `the checkpoint of step ${r.fromStep}`;
      return `${r.at}: model lost at step ${r.atStep}, restored from ${from}, steps ${r.fromStep === null ? 0 : r.fromStep + 1}..${r.atStep} re-run`;
    })
    .join('; ');
}

function siblingTable(summary: RunSummary): Table {
  const rate = (x: { groupsChosen: number; groupsRescued: number }) => (x.groupsChosen ? pct(x.groupsRescued / x.groupsChosen) : '-');
  return {
    header: ['sibling', 'groups rescued / chosen', 'rate', 'first half', 'second half', 'by task kind'],
    numeric: [1, 2, 3, 4],
    rows: Object.entries(summary.siblings)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([id, stats]) => [
        id,
        `${stats.groupsRescued} / ${stats.groupsChosen}`,
        rate(stats),
        rate(stats.firstHalf),
        rate(stats.secondHalf),
        Object.entries(stats.byKind)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([kind, k]) => `${kind} ${k.groupsRescued}/${k.groupsChosen}`)
          .join(', '),
      ]),
  };
}

/**
 * The report's page; `viewerUrl` is where the trajectory viewer serves
 * (harness-s ui): the page links the run's steps and rollouts there.
 */
export async function runReportPage(data: RunReportData, generatedAt = new Date(), viewerUrl: string | null = null): Promise<string> {
  const sections = await chartSections(runReportCharts(data));
  sections.push({
    kind: 'table',
    id: 'siblings',
    title: 'Rescue record per sibling',
    caption:
      'Dead groups each sibling was chosen for, and how many of them it rescued (a success among its rescue rollouts), over the whole run and its two halves.',
    table: siblingTable(data.summary),
  });
  const links: Array<[string, string]> = viewerUrl
    ? [['Steps, groups and every rollout in the trajectory viewer', `${viewerUrl}/runs/${encodeURIComponent(data.runId)}`]]
    : [];
  return renderPage({
    title: `Harness-S run ${data.runId}`,
    simulated: data.simulated,
    facts: runFacts(data),
    links,
    sections,
    generatedAt,
  });
}
