/**
 * A step's page: for each task of the batch, its base rollouts; for a dead
 * group, what the router saw (the profile's evidence, votes where the vote
 * strategy ran) and chose, and the rescue rollouts by harness. Filtered by
 * kind, harness, outcome, failure type, group state and task id; paged by task.
 */
import { isSimulatedEnv } from '../core/sim-kind';
import type { BehaviorProfiles } from '../core/router/profiles';
import type { StepRecord, StoredRoutingDecision } from '../core/store/run-store';
import { facts, fixed, href, html, outcomeBadge, page, pager, percent, table, withQuery, type Html } from './layout';
import { pageNumber, runHref, stepHref } from './run-pages';
import type { RolloutRow, RunRow, ViewerStore } from './viewer-store';

export const TASKS_PER_PAGE = 25;

export function trajectoryHref(runId: string, r: Pick<RolloutRow, 'phase' | 'step' | 'taskId' | 'harnessId' | 'sample'>): string {
  return href('/runs', runId, 'trajectories', r.phase, r.step, r.taskId, r.harnessId, r.sample);
}

export function taskHref(runId: string, taskId: string): string {
  return href('/runs', runId, 'tasks', taskId);
}

/** A task's group at a step: its base rollouts, its rescue, and what became of it. */
interface TaskGroup {
  taskId: string;
  kind: string;
  base: RolloutRow[];
  rescue: RolloutRow[];
  decision: StoredRoutingDecision | null;
  state: 'live' | 'dead' | 'rescued' | 'failed';
  failure: string | null;
}

export const GROUP_STATES = ['live', 'dead', 'rescued', 'failed'] as const;

/** The step page's filters, as the query gives them. */
export interface GroupFilter {
  kind: string;
  harness: string;
  outcome: string;
  failure: string;
  state: string;
  task: string;
}

export function groupFilter(query: URLSearchParams): GroupFilter {
  const get = (name: string) => (query.get(name) ?? '').trim();
  return {
    kind: get('kind'),
    harness: get('harness'),
    outcome: get('outcome'),
    failure: get('failure'),
    state: get('state'),
    task: get('task'),
  };
}

function groupsOf(rollouts: readonly RolloutRow[], decisions: readonly StoredRoutingDecision[], step: StepRecord): TaskGroup[] {
  const byTask = new Map<string, TaskGroup>();
  const decisionOf = new Map(decisions.map((d) => [d.taskId, d]));
  const failedOf = new Map(step.summary.failedGroups.map((f) => [f.taskId, `${f.role} group failed: ${f.reason}`]));
  for (const r of rollouts) {
    let group = byTask.get(r.taskId);
    if (!group) {
      group = {
        taskId: r.taskId,
        kind: r.taskKind,
        base: [],
        rescue: [],
        decision: decisionOf.get(r.taskId) ?? null,
        state: 'live',
        failure: failedOf.get(r.taskId) ?? null,
      };
      byTask.set(r.taskId, group);
    }
    (r.role === 'rescue' ? group.rescue : group.base).push(r);
  }
  for (const [taskId, failure] of failedOf) {
    if (!byTask.has(taskId))
      byTask.set(taskId, { taskId, kind: '', base: [], rescue: [], decision: decisionOf.get(taskId) ?? null, state: 'failed', failure });
  }
  for (const group of byTask.values()) {
    if (group.failure) group.state = 'failed';
    else if (group.base.length > 0 && group.base.every((r) => !r.success))
      group.state = group.rescue.some((r) => r.success) ? 'rescued' : 'dead';
  }
  return [...byTask.values()];
}

function matches(group: TaskGroup, filter: GroupFilter): boolean {
  if (filter.kind && group.kind !== filter.kind) return false;
  if (filter.state && group.state !== filter.state) return false;
  if (filter.task && !group.taskId.includes(filter.task)) return false;
  if (filter.harness || filter.outcome || filter.failure) {
    return [...group.base, ...group.rescue].some(
      (r) =>
        (!filter.harness || r.harnessId === filter.harness) &&
        (!filter.outcome || (filter.outcome === 'success') === r.success) &&
        (!filter.failure || r.failureType === filter.failure),
    );
  }
  return true;
}

function option(value: string, selected: string, label = value): Html {
  return html`<option value="${value}"${selected === value ? html` selected` : ''}>${label || 'any'}</option>`;
}

export function filterForm(
  action: string,
  fields: Array<{ name: string; label: string; value: string; options?: readonly string[] }>,
): Html {
  return html`<form class="filters" method="get" action="${action}">
${fields.map(
  (f) =>
    html`<label>${f.label}${
      f.options
        ? html`<select name="${f.name}">${option('', f.value)}${f.options.map((o) => option(o, f.value))}</select>`
        : html`<input name="${f.name}" value="${f.value}" size="24">`
    }</label>`,
)}
<button type="submit">filter</button> <a href="${action}">clear</a></form>`;
}

function rolloutCells(runId: string, rollouts: readonly RolloutRow[]): Html {
  return html`${rollouts.map((r) => html`<a href="${trajectoryHref(runId, r)}" title="${r.harnessId} sample ${r.sample}">${outcomeBadge(r.success)} ${fixed(r.reward, 2)}${r.failureType ? html` <span class="muted">${r.failureType}</span>` : ''} <span class="muted">${r.turns}t</span></a><br>`)}`;
}

/** The profile's evidence for a routed task: each candidate's cells for the task's kind and its base failure types. */
function evidence(decision: StoredRoutingDecision, profiles: BehaviorProfiles | null): Html {
  const candidates = [...new Set([...decision.chosen, ...Object.keys(decision.scores)])];
  const failureTypes = Object.keys(decision.failureCounts);
  const kindCell = (harness: string) => profiles?.kindCells.find((c) => c.harnessId === harness && c.kind === decision.kind);
  const cell = (harness: string, failureType: string) =>
    profiles?.cells.find((c) => c.harnessId === harness && c.kind === decision.kind && c.failureType === failureType);
  return html`
<p>Router <b>${decision.strategy}</b>${decision.fallback ? ' (no usable vote: the validation rule decided)' : ''}, profile v${decision.profileVersion}; base failures: ${
    Object.entries(decision.failureCounts)
      .map(([t, n]) => `${t} ×${n}`)
      .join(', ') || 'none'
  }.</p>
${decision.failureSummary ? html`<details><summary>what the router was told</summary><pre>${decision.failureSummary}</pre></details>` : ''}
${table(candidates, [
  { header: 'harness', cell: (h) => html`${h}${decision.chosen.includes(h) ? html` <span class="badge harness">chosen</span>` : ''}` },
  { header: 'score', numeric: true, cell: (h) => (h in decision.scores ? fixed(decision.scores[h], 3) : '–') },
  {
    header: `probe ${decision.kind}`,
    numeric: true,
    cell: (h) => {
      const c = kindCell(h);
      return c ? `${c.successes}/${c.attempts}` : '–';
    },
  },
  {
    header: 'rescues of the kind',
    numeric: true,
    cell: (h) => {
      const c = kindCell(h);
      return c ? `${c.rescueSuccesses}/${c.rescueAttempts}` : '–';
    },
  },
  ...failureTypes.map((t) => ({
    header: `after ${t}`,
    numeric: true,
    cell: (h: string) => {
      const c = cell(h, t);
      return c ? `${c.successes}/${c.attempts}` : '–';
    },
  })),
  {
    header: 'this rescue',
    numeric: true,
    cell: (h) => {
      const o = decision.outcome?.[h];
      return o ? `${o.successes}/${o.rollouts}` : '–';
    },
  },
])}
${
  decision.votes.length
    ? html`<h3>Votes</h3>${table(decision.votes, [
        { header: 'voter', cell: (v) => v.voter },
        { header: 'ballot', cell: (v) => (v.ok ? v.ranking.join(' > ') : html`<span class="fail">${v.reason}</span>`) },
        { header: 'ms', numeric: true, cell: (v) => v.latencyMs },
      ])}`
    : ''
}`;
}

function groupSection(runId: string, group: TaskGroup, profiles: Map<number, BehaviorProfiles | null>): Html {
  const byHarness = new Map<string, RolloutRow[]>();
  for (const r of group.rescue) byHarness.set(r.harnessId, [...(byHarness.get(r.harnessId) ?? []), r]);
  const state = { live: 'live group', dead: 'dead group, not rescued', rescued: 'dead group, rescued', failed: 'group failed' }[
    group.state
  ];
  return html`<section class="group" data-task="${group.taskId}" data-state="${group.state}">
<h2>${group.taskId} <span class="muted">${group.kind} · ${state}</span> <a href="${taskHref(runId, group.taskId)}">side by side</a></h2>
${group.failure ? html`<p class="fail">${group.failure}</p>` : ''}
<h3>Base rollouts${group.base[0] ? html` <span class="muted">(${group.base[0].harnessId})</span>` : ''}</h3>
${group.base.length ? rolloutCells(runId, group.base) : html`<p class="muted">none stored</p>`}
${group.decision ? html`<h3>Routing</h3>${evidence(group.decision, profiles.get(group.decision.profileVersion) ?? null)}` : ''}
${
  byHarness.size
    ? html`<h3>Rescue rollouts</h3>${table(
        [...byHarness],
        [
          { header: 'harness', cell: ([h]) => h },
          { header: 'rollouts', cell: ([, rows]) => rolloutCells(runId, rows) },
        ],
      )}`
    : ''
}
</section>`;
}

export async function stepPage(store: ViewerStore, run: RunRow, step: StepRecord, query: URLSearchParams): Promise<string> {
  const filter = groupFilter(query);
  const n = pageNumber(query);
  const [rollouts, decisions] = await Promise.all([store.stepRollouts(run.runId, step.step), store.routingDecisions(run.runId, step.step)]);
  const groups = groupsOf(rollouts, decisions, step);
  const shown = groups.filter((g) => matches(g, filter));
  const pages = Math.max(1, Math.ceil(shown.length / TASKS_PER_PAGE));
  const pageGroups = shown.slice((n - 1) * TASKS_PER_PAGE, n * TASKS_PER_PAGE);
  const profiles = new Map<number, BehaviorProfiles | null>();
  for (const version of new Set(pageGroups.flatMap((g) => (g.decision ? [g.decision.profileVersion] : [])))) {
    profiles.set(version, await store.runs.profiles(run.runId, version));
  }
  const s = step.summary;
  const url = stepHref(run.runId, step.step);
  const harnesses = [...new Set(rollouts.map((r) => r.harnessId))].sort();
  const kinds = [...new Set(rollouts.map((r) => r.taskKind))].sort();
  const mismatch = s.logprobMismatch;
  const body = html`
${facts([
  ['policy', `${s.policyVersionBefore} → ${s.policyVersion}`],
  ['base success', `${percent(s.baseSuccessRate)} over ${s.baseRollouts} rollouts (mean reward ${fixed(s.baseMeanReward, 3)})`],
  [
    'groups',
    `${s.tasks}: ${s.deadGroups} dead, ${s.rescuedGroups} rescued (${s.rescueRollouts} rescue rollouts), ${s.failedGroups.length} failed; live share ${percent(s.liveGroupFraction)}`,
  ],
  [
    'trainer',
    Object.entries(s.trainerMetrics)
      .map(([k, v]) => `${k} ${fixed(v, 4)}`)
      .join(' · ') || '–',
  ],
  [
    'sampler vs trainer log-probs',
    mismatch
      ? `mean |Δ| ${fixed(mismatch.meanAbsDiff, 4)} over ${mismatch.tokens} tokens, ratio ${fixed(mismatch.ratioMean, 3)} ± ${fixed(mismatch.ratioStd, 3)}`
      : 'not measured',
  ],
  [
    'phase seconds',
    s.phaseSeconds
      ? `rollout ${fixed(s.phaseSeconds.rollout, 1)}, train ${fixed(s.phaseSeconds.train, 1)}, publish ${fixed(s.phaseSeconds.publish, 1)}`
      : '–',
  ],
  ...(s.sampling
    ? [['refill', `${s.sampling.refill}: ${s.sampling.drawn} tasks drawn, ${s.sampling.dropped.length} groups dropped`] as [string, string]]
    : []),
])}
${filterForm(url, [
  { name: 'task', label: 'task id contains', value: filter.task },
  { name: 'kind', label: 'kind', value: filter.kind, options: kinds },
  { name: 'state', label: 'group', value: filter.state, options: GROUP_STATES },
  { name: 'harness', label: 'harness', value: filter.harness, options: harnesses },
  { name: 'outcome', label: 'outcome', value: filter.outcome, options: ['success', 'failure'] },
  {
    name: 'failure',
    label: 'failure type',
    value: filter.failure,
    options: ['format_error', 'execution_error', 'wrong_answer', 'turn_limit', 'policy_error'],
  },
])}
<p class="muted">${shown.length} of ${groups.length} groups shown.</p>
${pageGroups.map((g) => groupSection(run.runId, g, profiles))}
${pager(n > 1 ? withQuery(url, { ...filter, page: n - 1 }) : null, n < pages ? withQuery(url, { ...filter, page: n + 1 }) : null, `page ${n} of ${pages}`)}`;
  return page({
    title: `Step ${step.step} of ${run.name}`,
    simulated: isSimulatedEnv(run.env),
    trail: [
      [run.runId, runHref(run.runId)],
      [`step ${step.step}`, url],
    ],
    body,
  });
}
