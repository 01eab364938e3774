/**
 * The viewer's page frame and small parts: escaping by construction (the
 * `html` tag escapes every value it is given unless it is already `Html`),
 * the SIMULATED banner, tables, pagers and sparklines. Pages are plain HTML
 * with inline styles: no script, nothing fetched from anywhere else.
 */
import { escapeHtml } from '../core/report/html';

/** Markup that is already safe: made by `html` or `raw`. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

type Value = Html | string | number | null | undefined | false | readonly Value[];

function render(value: Value): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** A template whose values are escaped (arrays joined, null/undefined/false left out). */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  return new Html(strings.reduce((out, s, i) => out + s + (i < values.length ? render(values[i]) : ''), ''));
}

/** Trusted markup, as is. */
export function raw(text: string): Html {
  return new Html(text);
}

/** An address with its path segments escaped: href('/runs', id, 'steps', 3). */
export function href(...segments: Array<string | number>): string {
  return segments.map((s, i) => (i === 0 ? String(s) : encodeURIComponent(String(s)))).join('/');
}

/** `path?query` with the empty values left out. */
export function withQuery(path: string, query: Record<string, string | number | undefined | null>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query))
    if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

const STYLE = `
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; color: #222; margin: 0; background: #fafafa; }
  header.top { background: #24292f; color: #eee; padding: 6px 24px; }
  header.top a { color: #fff; margin-right: 16px; text-decoration: none; font-weight: 600; }
  main { max-width: 1280px; margin: 0 auto; padding: 12px 24px 48px; }
  h1 { font-size: 20px; margin: 8px 0 4px; word-break: break-all; }
  h2 { font-size: 16px; margin: 16px 0 6px; }
  h3 { font-size: 14px; margin: 10px 0 4px; }
  a { color: #0550ae; }
  .simulated { background: #b00020; color: white; font-weight: bold; padding: 6px 24px; }
  .badge { display: inline-block; font-size: 11px; font-weight: bold; padding: 0 6px; border-radius: 3px; vertical-align: middle; color: white; background: #6e7781; }
  .badge.sim { background: #b00020; }
  .ok { color: #116329; } .fail { color: #b00020; } .muted { color: #6e7781; }
  .badge.ok { background: #1a7f37; color: white; } .badge.fail { background: #cf222e; color: white; }
  .badge.harness { background: #8250df; }
  dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0 12px; }
  dl.facts dt { color: #555; } dl.facts dd { margin: 0; word-break: break-all; }
  section { background: white; border: 1px solid #e2e2e2; border-radius: 6px; margin: 0 0 14px; padding: 10px 14px; overflow-x: auto; }
  table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
  th, td { border-bottom: 1px solid #e6e6e6; padding: 3px 8px; text-align: left; vertical-align: top; }
  td.num, th.num { text-align: right; }
  form.filters { display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin: 6px 0 10px; }
  form.filters label { display: flex; flex-direction: column; font-size: 12px; color: #555; }
  nav.pager { margin: 8px 0; } nav.pager a, nav.pager span { margin-right: 12px; }
  .message { border-left: 4px solid #d0d7de; margin: 6px 0; padding: 4px 10px; background: #fff; }
  .message.system { border-color: #6e7781; } .message.user { border-color: #0969da; }
  .message.assistant { border-color: #1a7f37; } .message.tool { border-color: #9a6700; }
  .message.shaped { background: #fbefff; }
  .message pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0; font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
  .intervention { border: 1px dashed #8250df; background: #fbefff; padding: 2px 8px; margin: 4px 0; font-size: 12.5px; }
  .role { font-weight: 600; font-size: 12px; text-transform: uppercase; color: #555; }
  .columns { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 12px; }
  .tokens { display: flex; flex-wrap: wrap; gap: 2px; font: 11px ui-monospace, Menlo, monospace; }
  .tokens span { padding: 0 3px; border-radius: 2px; }
  .tokens span.obs { color: #6e7781; background: #f0f0f0; }
  footer { color: #777; font-size: 12px; margin-top: 24px; }
`;

export interface Frame {
  title: string;
  /** Shows the SIMULATED banner: this page shows a run on the simulator. */
  simulated: boolean;
  /** Links above the title: [label, address]. */
  trail: Array<[string, string]>;
  body: Html;
}

export function page(frame: Frame): string {
  const title = `${frame.title}${frame.simulated ? ' [SIMULATED]' : ''} · harness-s`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>${raw(STYLE)}</style>
</head>
<body>
<header class="top"><a href="/runs">harness-s runs</a>${frame.trail.map(([label, to]) => html` / <a href="${to}">${label}</a>`)}</header>
${frame.simulated ? html`<div class="simulated">SIMULATED: sim policy, sim environment, sim trainer. Every rollout and number on this page is simulated.</div>` : ''}
<main>
<h1>${frame.title}${frame.simulated ? html` <span class="badge sim">SIMULATED</span>` : ''}</h1>
${frame.body}
<footer>harness-s trajectory viewer: read-only pages of the run store.</footer>
</main>
</body>
</html>
`.text;
}

export function facts(rows: Array<[string, Value]>): Html {
  return html`<dl class="facts">${rows.map(([label, value]) => html`<dt>${label}</dt><dd>${value}</dd>`)}</dl>`;
}

export interface Column<T> {
  header: string;
  cell: (row: T) => Value;
  numeric?: boolean;
}

export function table<T>(rows: readonly T[], columns: ReadonlyArray<Column<T>>, empty = 'none'): Html {
  if (rows.length === 0) return html`<p class="muted">${empty}</p>`;
  return html`<table><thead><tr>${columns.map((c) => html`<th${raw(c.numeric ? ' class="num"' : '')}>${c.header}</th>`)}</tr></thead>
<tbody>${rows.map((row) => html`<tr>${columns.map((c) => html`<td${raw(c.numeric ? ' class="num"' : '')}>${c.cell(row)}</td>`)}</tr>\n`)}</tbody></table>`;
}

/** Previous and next links of a paged list. */
export function pager(previous: string | null, next: string | null, where: string): Html {
  if (!previous && !next) return html``;
  return html`<nav class="pager">${previous ? html`<a href="${previous}" rel="prev">← previous</a>` : html`<span class="muted">← previous</span>`}<span>${where}</span>${next ? html`<a href="${next}" rel="next">next →</a>` : html`<span class="muted">next →</span>`}</nav>`;
}

/** A line of values in [0, 1] as an inline SVG (no script, no request). */
export function sparkline(values: readonly number[], width = 120, height = 24): Html {
  if (values.length === 0) return html`<span class="muted">no steps</span>`;
  const x = (i: number) => (values.length === 1 ? width / 2 : (i / (values.length - 1)) * (width - 2) + 1);
  const y = (v: number) => height - 1 - Math.max(0, Math.min(1, v)) * (height - 2);
  const points = values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
  const last = values[values.length - 1];
  return html`<svg class="sparkline" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="base success per step, last ${percent(last)}"><polyline fill="none" stroke="#0969da" stroke-width="1.5" points="${points}"/></svg>`;
}

export function percent(value: number | null | undefined): string {
  return value === null || value === undefined || !Number.isFinite(value) ? '–' : `${(value * 100).toFixed(1)}%`;
}

export function fixed(value: number | null | undefined, digits = 2): string {
  return value === null || value === undefined || !Number.isFinite(value) ? '–' : value.toFixed(digits);
}

export function outcomeBadge(success: boolean): Html {
  return success ? html`<span class="badge ok">success</span>` : html`<span class="badge fail">failure</span>`;
}
