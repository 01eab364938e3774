/**
 * The viewer's run-level pages: the runs, and one run's steps.
 */
import { isSimulatedEnv } from '../core/sim-kind';
import type { StepRecord } from '../core/store/run-store';
import { facts, fixed, href, html, page, pager, percent, sparkline, table, withQuery, type Html } from './layout';
import type { RunRow, ViewerStore } from './viewer-store';

/** Where the viewer links outside itself, and what it asks Temporal. */
export interface ViewerLinks {
  /** The run's page in the Temporal Web UI. */
  temporalUi(runId: string): string;
  /** Each run's workflow status ('unknown' where Temporal does not say). */
  statuses(runIds: readonly string[]): Promise<Map<string, string>>;
}

export const RUNS_PER_PAGE = 50;
export const STEPS_PER_PAGE = 100;

export function runHref(runId: string): string {
  return href('/runs', runId);
}

export function stepHref(runId: string, step: number): string {
  return href('/runs', runId, 'steps', step);
}

/** A page number from the query (1 when absent or not a page). */
export function pageNumber(query: URLSearchParams): number {
  const n = Number(query.get('page') ?? '1');
  return Number.isInteger(n) && n >= 1 ? n : 1;
}

function configuredSteps(run: RunRow): number | null {
  const steps = (run.config as { steps?: unknown } | null)?.steps;
  return typeof steps === 'number' ? steps : null;
}

export async function runsPage(store: ViewerStore, links: ViewerLinks, query: URLSearchParams): Promise<string> {
  const n = pageNumber(query);
  const { runs, more } = await store.listRuns((n - 1) * RUNS_PER_PAGE, RUNS_PER_PAGE);
  const ids = runs.map((r) => r.runId);
  const [rates, statuses] = await Promise.all([store.baseSuccessByRun(ids), links.statuses(ids)]);
  const body = html`
<p class="muted">Newest first. A run's page lists its steps; a step's page its groups, routing decisions and rescues; every rollout has a page of its own.</p>
${table(
  runs,
  [
    { header: 'run', cell: (r) => html`<a href="${runHref(r.runId)}">${r.name}</a><br><span class="muted">${r.runId}</span>` },
    { header: 'env', cell: (r) => html`${r.env}${isSimulatedEnv(r.env) ? html` <span class="badge sim">SIMULATED</span>` : ''}` },
    { header: 'status', cell: (r) => statuses.get(r.runId) ?? 'unknown' },
    { header: 'steps', numeric: true, cell: (r) => `${rates.get(r.runId)?.length ?? 0}/${configuredSteps(r) ?? '?'}` },
    { header: 'base success per step', cell: (r) => sparkline(rates.get(r.runId) ?? []) },
    { header: 'last', numeric: true, cell: (r) => percent(rates.get(r.runId)?.at(-1)) },
    { header: 'started', cell: (r) => r.createdAt.toISOString().replace('T', ' ').slice(0, 19) },
    {
      header: 'links',
      cell: (r) => html`<a href="${links.temporalUi(r.runId)}">Temporal</a> · <a href="${href('/runs', r.runId, 'report')}">report</a>`,
    },
  ],
  'No runs in this run store yet: start one with `harness-s run start` or `harness-s demo`.',
)}
${pager(n > 1 ? withQuery('/runs', { page: n - 1 }) : null, more ? withQuery('/runs', { page: n + 1 }) : null, `page ${n}`)}`;
  return page({ title: 'Runs', simulated: false, trail: [], body });
}

function phaseTimes(step: StepRecord): string {
  const p = step.summary.phaseSeconds;
  if (!p) return '–';
  return `rollout ${fixed(p.rollout, 1)} · train ${fixed(p.train, 1)} · publish ${fixed(p.publish, 1)}`;
}

export async function runPage(store: ViewerStore, links: ViewerLinks, run: RunRow, query: URLSearchParams): Promise<string> {
  const n = pageNumber(query);
  const [{ steps, total }, evaluations, statuses] = await Promise.all([
    store.steps(run.runId, (n - 1) * STEPS_PER_PAGE, STEPS_PER_PAGE),
    store.runs.evaluations(run.runId),
    links.statuses([run.runId]),
  ]);
  const pages = Math.max(1, Math.ceil(total / STEPS_PER_PAGE));
  const url = runHref(run.runId);
  const body = html`
${facts([
  ['name', run.name],
  ['env', run.env],
  ['status', statuses.get(run.runId) ?? 'unknown'],
  ['steps', `${total} recorded of ${configuredSteps(run) ?? '?'} configured`],
  ['started', run.createdAt.toISOString()],
  ...(run.parent
    ? [
        [
          'forked from',
          html`<a href="${stepHref(run.parent.runId, run.parent.step)}">${run.parent.runId}, step ${run.parent.step}</a>`,
        ] as [string, Html],
      ]
    : []),
  [
    'links',
    html`<a href="${links.temporalUi(run.runId)}">Temporal Web UI</a> · <a href="${href('/runs', run.runId, 'report')}">report</a> · <a href="${href('/runs', run.runId, 'rollouts')}">search its rollouts</a>`,
  ],
])}
<section><h2>Steps</h2>
${table(
  steps,
  [
    { header: 'step', numeric: true, cell: (s) => html`<a href="${stepHref(run.runId, s.step)}">${s.step}</a>` },
    { header: 'policy', cell: (s) => s.policyVersion },
    { header: 'base success', numeric: true, cell: (s) => percent(s.summary.baseSuccessRate) },
    { header: 'mean reward', numeric: true, cell: (s) => fixed(s.summary.baseMeanReward, 3) },
    { header: 'groups', numeric: true, cell: (s) => s.summary.tasks },
    { header: 'dead', numeric: true, cell: (s) => s.summary.deadGroups },
    { header: 'rescued', numeric: true, cell: (s) => s.summary.rescuedGroups },
    { header: 'failed', numeric: true, cell: (s) => s.summary.failedGroups.length },
    { header: 'live share', numeric: true, cell: (s) => percent(s.summary.liveGroupFraction) },
    { header: 'phase seconds', cell: phaseTimes },
  ],
  'No step recorded yet.',
)}
${pager(n > 1 ? withQuery(url, { page: n - 1 }) : null, n < pages ? withQuery(url, { page: n + 1 }) : null, `page ${n} of ${pages}`)}
</section>
<section><h2>Evaluations</h2>
${table(
  evaluations,
  [
    { header: 'after steps', numeric: true, cell: (e) => e.afterSteps },
    { header: 'policy', cell: (e) => e.policyVersion },
    { header: 'base success', numeric: true, cell: (e) => percent(e.base.successRate) },
    { header: 'Rank-1 success', numeric: true, cell: (e) => percent(e.rank1.successRate) },
    { header: 'tasks', numeric: true, cell: (e) => e.tasks },
  ],
  'No evaluation stored.',
)}
</section>`;
  return page({ title: `Run ${run.name}`, simulated: isSimulatedEnv(run.env), trail: [[run.runId, url]], body });
}
