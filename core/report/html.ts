/**
 * A report as one self-contained HTML page: styles inline, charts inline as
 * SVG, no script, nothing fetched when it is viewed (its Content-Security-Policy
 * forbids every load, so a chart that wanted one would show as an error).
 */
import type { Chart } from './chart';
import { renderSvg } from './vega';

export interface Table {
  header: string[];
  rows: string[][];
  /** Columns whose cells are numbers: aligned right. */
  numeric?: number[];
}

export type PageSection =
  | { kind: 'chart'; chart: Chart; svg: string | null; warnings: string[] }
  | { kind: 'table'; id: string; title: string; caption: string; table: Table };

export interface Page {
  /** The page's title and heading. */
  title: string;
  simulated: boolean;
  /** The header's facts, label and value. */
  facts: Array<[string, string]>;
  /** Links under the facts: label and address (none when absent). */
  links?: Array<[string, string]>;
  sections: PageSection[];
  generatedAt: Date;
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** Renders each chart that has a spec to SVG. */
export async function chartSections(charts: readonly Chart[]): Promise<PageSection[]> {
  const sections: PageSection[] = [];
  for (const chart of charts) {
    const rendered = chart.spec ? await renderSvg(chart.spec) : null;
    sections.push({ kind: 'chart', chart, svg: rendered?.svg ?? null, warnings: rendered?.warnings ?? [] });
  }
  return sections;
}

const STYLE = `
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: #222; margin: 0; background: #fafafa; }
  main { max-width: 1080px; margin: 0 auto; padding: 16px 24px 48px; }
  h1 { font-size: 22px; margin: 8px 0 4px; word-break: break-all; }
  h2 { font-size: 16px; margin: 0 0 6px; }
  .simulated { background: #b00020; color: white; font-weight: bold; padding: 8px 24px; letter-spacing: 0.02em; }
  .badge { display: inline-block; background: #b00020; color: white; font-size: 12px; font-weight: bold; padding: 1px 6px; border-radius: 3px; vertical-align: middle; }
  dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 12px 0 16px; }
  dl.facts dt { color: #555; }
  dl.facts dd { margin: 0; font-variant-numeric: tabular-nums; word-break: break-all; }
  nav ul { margin: 4px 0 16px; padding-left: 18px; columns: 2; }
  section, figure { background: white; border: 1px solid #e2e2e2; border-radius: 6px; margin: 0 0 16px; padding: 12px 16px; overflow-x: auto; }
  figure svg { display: block; max-width: none; }
  figcaption, p.caption { color: #444; margin: 8px 0 0; max-width: 820px; }
  .empty { color: #777; font-style: italic; }
  .warning { color: #8a5a00; }
  table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
  th, td { border-bottom: 1px solid #e6e6e6; padding: 3px 10px; text-align: left; vertical-align: top; }
  td.num { text-align: right; }
  footer { color: #777; font-size: 12px; }
`;

function tableHtml(table: Table): string {
  const numeric = new Set(table.numeric ?? []);
  const cell = (text: string, i: number) => `<td${numeric.has(i) ? ' class="num"' : ''}>${escapeHtml(text)}</td>`;
  return [
    '<table>',
    `<thead><tr>${table.header.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead>`,
    `<tbody>${table.rows.map((row) => `<tr>${row.map(cell).join('')}</tr>`).join('\n')}</tbody>`,
    '</table>',
  ].join('\n');
}

function sectionHtml(section: PageSection): string {
  if (section.kind === 'table') {
    return [
      `<section id="${escapeHtml(section.id)}">`,
      `<h2>${escapeHtml(section.title)}</h2>`,
      section.table.rows.length ? tableHtml(section.table) : '<p class="empty">none</p>',
      section.caption ? `<p class="caption">${escapeHtml(section.caption)}</p>` : '',
      '</section>',
    ].join('\n');
  }
  const { chart, svg, warnings } = section;
  return [
    `<figure id="${escapeHtml(chart.id)}" class="chart" data-chart="${escapeHtml(chart.id)}">`,
    svg ?? `<h2>${escapeHtml(chart.title)}</h2><p class="empty">nothing to plot</p>`,
    `<figcaption>${escapeHtml(chart.caption)}</figcaption>`,
    ...warnings.map((w) => `<p class="caption warning">Vega-Lite: ${escapeHtml(w)}</p>`),
    '</figure>',
  ].join('\n');
}

function sectionLink(section: PageSection): string {
  const [id, title] = section.kind === 'chart' ? [section.chart.id, section.chart.title] : [section.id, section.title];
  return `<li><a href="#${escapeHtml(id)}">${escapeHtml(title)}</a></li>`;
}

export function renderPage(page: Page): string {
  const title = `${page.title}${page.simulated ? ' [SIMULATED]' : ''}`;
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)}</title>`,
    `<style>${STYLE}</style>`,
    '</head>',
    '<body>',
    page.simulated
      ? '<div class="simulated">SIMULATED: sim policy, sim environment, sim trainer. Every number on this page is simulated.</div>'
      : '',
    '<main>',
    `<h1>${escapeHtml(page.title)}${page.simulated ? ' <span class="badge">SIMULATED</span>' : ''}</h1>`,
    '<dl class="facts">',
    ...page.facts.map(([label, value]) => `<dt>${escapeHtml(label)}</dt><dd>${escapeHtml(value)}</dd>`),
    '</dl>',
    ...(page.links ?? []).map(([label, to]) => `<p class="links"><a href="${escapeHtml(to)}">${escapeHtml(label)}</a></p>`),
    `<nav><ul>${page.sections.map(sectionLink).join('')}</ul></nav>`,
    ...page.sections.map(sectionHtml),
    `<footer>Written by harness-s at ${escapeHtml(page.generatedAt.toISOString())}. Charts: Vega-Lite, rendered to SVG when the page was written.</footer>`,
    '</main>',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
