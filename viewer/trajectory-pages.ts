/**
 * A rollout's own page (every message, tool call and observation, what the
 * harness did marked where it did it, the sampled tokens with their
 * log-probs, the reward and why), a task side by side (base at its first
 * step, the sibling that rescued it, base at the end), and the run's rollout
 * search.
 */
import { isSimulatedEnv } from '../core/sim-kind';
import type { HarnessIntervention, TokenSample } from '../core/policy/trajectory';
import { facts, fixed, href, html, outcomeBadge, page, pager, table, withQuery, type Html } from './layout';
import { runHref, stepHref } from './run-pages';
import { filterForm, taskHref, trajectoryHref } from './step-page';
import type { RolloutFilter, RolloutKey, RunRow, TrajectoryRow, ViewerStore } from './viewer-store';

/** Tokens shown per sample; a longer sample says how many more it has. */
const TOKENS_SHOWN = 2000;
export const ROLLOUTS_PER_PAGE = 100;
const MAX_ROLLOUTS_PER_PAGE = 500;

const INTERVENTION_LABELS: Record<HarnessIntervention['kind'], string> = {
  context: 'harness context (system prompt, injected docs)',
  scaffold: 'harness action (scaffold)',
  repair: 'harness repaired the action',
  refusal: 'harness refused the action',
  observation: 'harness shaped the observation',
};

/** The conversation, each message with the harness's interventions on it. */
function conversation(t: TrajectoryRow): Html {
  const marks = new Map<number, HarnessIntervention[]>();
  for (const i of t.interventions ?? []) marks.set(i.message, [...(marks.get(i.message) ?? []), i]);
  return html`${t.messages.map((m, i) => {
    const on = marks.get(i) ?? [];
    const calls = m.tool_calls ?? [];
    return html`<div class="message ${m.role}${on.length ? ' shaped' : ''}" id="m${i}">
<span class="role">${m.role}${m.tool_call_id ? ` (answers ${m.tool_call_id})` : ''}</span>
${on.map((x) => html`<div class="intervention"><span class="badge harness">${x.kind}</span> ${INTERVENTION_LABELS[x.kind]}<pre>${x.detail}</pre></div>`)}
<pre>${m.content}</pre>
${calls.map((c) => html`<div class="intervention" style="border-color:#1a7f37;background:#f0fff4"><b>tool call</b> ${c.function.name} <span class="muted">${c.id}</span><pre>${c.function.arguments}</pre></div>`)}
</div>`;
  })}
${t.interventions === null ? html`<p class="muted">Stored before harness interventions were recorded: none are marked.</p>` : ''}`;
}

/** A log-prob as a background: darker the less likely the sampled token was. */
function shade(logprob: number): string {
  const p = Math.exp(Math.max(-20, Math.min(0, logprob)));
  const lightness = 55 + Math.round(40 * p);
  return `hsl(30, 90%, ${lightness}%)`;
}

function tokens(sample: TokenSample, index: number): Html {
  const shown = Math.min(sample.responseIds.length, TOKENS_SHOWN);
  const spans = [];
  for (let i = 0; i < shown; i++) {
    const id = sample.responseIds[i];
    const lp = sample.responseLogprobs[i];
    spans.push(
      sample.responseMask[i] === 1
        ? html`<span style="background:${shade(lp)}" title="token ${id}, log-prob ${lp.toFixed(4)}">${id}</span>`
        : html`<span class="obs" title="token ${id}: observation (mask 0, not trained on)">${id}</span>`,
    );
  }
  const sampled = sample.responseMask.filter((m) => m === 1).length;
  const meanLogprob = sampled
    ? sample.responseLogprobs.reduce((s, lp, i) => s + (sample.responseMask[i] === 1 ? lp : 0), 0) / sampled
    : NaN;
  return html`<h3>Sample ${index + 1}: ${sample.promptIds.length} prompt tokens, ${sample.responseIds.length} response tokens (${sampled} sampled, mean log-prob ${fixed(meanLogprob, 3)})</h3>
<div class="tokens">${spans}</div>
${sample.responseIds.length > shown ? html`<p class="muted">${sample.responseIds.length - shown} more tokens not shown.</p>` : ''}`;
}

/** Why the reward: the outcome, the failure type, and the env's last word. */
function why(t: TrajectoryRow): Html {
  const last = [...t.messages].reverse().find((m) => m.role !== 'assistant');
  return html`<p>${outcomeBadge(t.success)} reward <b>${fixed(t.reward, 3)}</b>${t.failureType ? html`, failure type <b>${t.failureType}</b>` : ''}.</p>
${last ? html`<p class="muted">The env's last word:</p><pre>${last.content}</pre>` : ''}`;
}

function keyLabel(key: RolloutKey): string {
  return `${key.phase} step ${key.step} · ${key.harnessId} · sample ${key.sample}`;
}

export function trajectoryPage(run: RunRow, t: TrajectoryRow): string {
  const body = html`
${facts([
  ['task', html`${t.taskId} (${t.taskKind}) · <a href="${taskHref(run.runId, t.taskId)}">side by side</a>`],
  [
    'where',
    html`${t.phase} ${t.phase === 'train' ? html`<a href="${stepHref(run.runId, t.step)}">step ${t.step}</a>` : `step ${t.step}`}, ${t.role} rollout, sample ${t.sample}`,
  ],
  ['harness', t.harnessId],
  ['policy version', t.policyVersion],
  ['turns', t.turns],
  [
    'tokens',
    `${t.tokens} trained${t.promptTokens === null ? '' : `; the server processed ${t.promptTokens} prompt and ${t.completionTokens} completion tokens`}`,
  ],
  ['latency', `${(t.latencyMs / 1000).toFixed(2)} s`],
])}
<section><h2>Reward</h2>${why(t)}</section>
<section><h2>Conversation</h2>${conversation(t)}</section>
<section><h2>Sampled tokens</h2>
<p class="muted">Token ids as the inference server returned them, shaded by the sampler's log-prob (darker: less likely); grey: observation tokens (mask 0). The trainer's log-probs are not stored per rollout: the step page shows how far they were from the sampler's over the step.</p>
${t.samples.length ? t.samples.map(tokens) : html`<p class="muted">No token samples (an endpoint without token ids: evaluation only).</p>`}
</section>`;
  return page({
    title: `${t.taskId} · ${keyLabel(t)}`,
    simulated: isSimulatedEnv(run.env),
    trail: [
      [run.runId, runHref(run.runId)],
      ...(t.phase === 'train' ? [[`step ${t.step}`, stepHref(run.runId, t.step)] as [string, string]] : []),
      ['rollout', trajectoryHref(run.runId, t)],
    ],
    body,
  });
}

export async function sideBySidePage(store: ViewerStore, run: RunRow, taskId: string): Promise<string | null> {
  const keys = await store.sideBySide(run.runId, taskId);
  if (!keys.first && !keys.rescue && !keys.last) return null;
  const column = async (title: string, key: RolloutKey | null, none: string) => {
    const t = key ? await store.trajectory(run.runId, key) : null;
    if (!t) return html`<div><h2>${title}</h2><p class="muted">${none}</p></div>`;
    return html`<div><h2>${title}</h2><p><a href="${trajectoryHref(run.runId, t)}">${keyLabel(t)}</a></p>${why(t)}${conversation(t)}</div>`;
  };
  const body = html`<p class="muted">The same task under the base harness at its first training step, under the sibling that rescued it (else the first sibling tried), and under the base harness at the end (its last training step or evaluation).</p>
<div class="columns">
${await column('Base, first step', keys.first, 'never drawn under the base harness')}
${await column('Sibling rescue', keys.rescue, 'never rescued: its groups never died, or rescue was off')}
${await column('Base, at the end', keys.last, 'no later base rollout')}
</div>`;
  return page({
    title: `Task ${taskId} side by side`,
    simulated: isSimulatedEnv(run.env),
    trail: [
      [run.runId, runHref(run.runId)],
      [taskId, taskHref(run.runId, taskId)],
    ],
    body,
  });
}

/** The search's filter from the query (unknown outcome values ignored). */
export function rolloutFilter(query: URLSearchParams): RolloutFilter {
  const get = (name: string) => (query.get(name) ?? '').trim() || undefined;
  const outcome = get('outcome');
  return {
    phase: get('phase'),
    role: get('role'),
    kind: get('kind'),
    harness: get('harness'),
    failureType: get('failure'),
    task: get('task'),
    outcome: outcome === 'success' || outcome === 'failure' ? outcome : undefined,
  };
}

/** The keyset cursor as one query value, and back (null when absent or not one). */
export function encodeCursor(key: RolloutKey): string {
  return Buffer.from(JSON.stringify([key.phase, key.step, key.taskId, key.harnessId, key.sample])).toString('base64url');
}

export function decodeCursor(text: string | null): RolloutKey | null {
  if (!text) return null;
  try {
    const [phase, step, taskId, harnessId, sample] = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    if (
      typeof phase !== 'string' ||
      !Number.isInteger(step) ||
      typeof taskId !== 'string' ||
      typeof harnessId !== 'string' ||
      !Number.isInteger(sample)
    )
      return null;
    return { phase, step, taskId, harnessId, sample };
  } catch {
    return null;
  }
}

export async function rolloutsPage(store: ViewerStore, run: RunRow, query: URLSearchParams): Promise<string> {
  const filter = rolloutFilter(query);
  const asked = Number(query.get('per'));
  const per = Number.isInteger(asked) && asked >= 1 ? Math.min(asked, MAX_ROLLOUTS_PER_PAGE) : ROLLOUTS_PER_PAGE;
  const [{ rollouts, next }, values] = await Promise.all([
    store.searchRollouts(run.runId, filter, decodeCursor(query.get('after')), per),
    store.filterValues(run.runId),
  ]);
  const url = href('/runs', run.runId, 'rollouts');
  const formValues = {
    phase: filter.phase,
    role: filter.role,
    kind: filter.kind,
    harness: filter.harness,
    outcome: filter.outcome,
    failure: filter.failureType,
    task: filter.task,
    per: per === ROLLOUTS_PER_PAGE ? undefined : per,
  };
  const body = html`
${filterForm(url, [
  { name: 'task', label: 'task id (or its start)', value: filter.task ?? '' },
  { name: 'phase', label: 'phase', value: filter.phase ?? '', options: ['train', 'eval'] },
  { name: 'role', label: 'role', value: filter.role ?? '', options: ['base', 'rescue', 'eval', 'probe'] },
  { name: 'kind', label: 'kind', value: filter.kind ?? '', options: values.kinds },
  { name: 'harness', label: 'harness', value: filter.harness ?? '', options: values.harnesses },
  { name: 'outcome', label: 'outcome', value: filter.outcome ?? '', options: ['success', 'failure'] },
  { name: 'failure', label: 'failure type', value: filter.failureType ?? '', options: values.failureTypes },
])}
${table(
  rollouts,
  [
    { header: 'phase', cell: (r) => r.phase },
    {
      header: 'step',
      numeric: true,
      cell: (r) => (r.phase === 'train' ? html`<a href="${stepHref(run.runId, r.step)}">${r.step}</a>` : r.step),
    },
    { header: 'task', cell: (r) => html`<a href="${taskHref(run.runId, r.taskId)}">${r.taskId}</a>` },
    { header: 'kind', cell: (r) => r.taskKind },
    { header: 'harness', cell: (r) => r.harnessId },
    { header: 'role', cell: (r) => r.role },
    {
      header: 'rollout',
      cell: (r) => html`<a href="${trajectoryHref(run.runId, r)}">${outcomeBadge(r.success)} ${fixed(r.reward, 2)}</a>`,
    },
    { header: 'failure type', cell: (r) => r.failureType ?? '' },
    { header: 'turns', numeric: true, cell: (r) => r.turns },
  ],
  'No rollout matches.',
)}
${pager(query.get('after') ? withQuery(url, formValues) : null, next ? withQuery(url, { ...formValues, after: encodeCursor(next) }) : null, query.get('after') ? '(the previous link goes back to the first page)' : 'first page')}`;
  return page({
    title: `Rollouts of ${run.name}`,
    simulated: isSimulatedEnv(run.env),
    trail: [
      [run.runId, runHref(run.runId)],
      ['rollouts', url],
    ],
    body,
  });
}
