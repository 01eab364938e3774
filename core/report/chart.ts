/**
 * What every chart of the reports is: its id, title and caption, and the
 * look the run and compare charts share. vega.ts renders the specs.
 */
import type { TopLevelSpec } from './vega';

export interface Chart {
  /** Unique on its page: the figure's anchor. */
  id: string;
  title: string;
  /** What is plotted, and how to read it. */
  caption: string;
  /** null when there is nothing to plot; `caption` then says why. */
  spec: TopLevelSpec | null;
}

export const WIDTH = 560;
export const HEIGHT = 220;
export const PERCENT_AXIS = { format: '.0%' } as const;
export const STEP_AXIS = { format: 'd', tickMinStep: 1 } as const;
export const LEGEND_BELOW = { orient: 'bottom', title: null } as const;

/** The chart's own title, with SIMULATED under it for the sim, so a chart copied out of the page still says so. */
function chartTitle(text: string, simulated: boolean) {
  return simulated ? { text, subtitle: 'SIMULATED', subtitleColor: '#b00020', subtitleFontWeight: 'bold' as const } : { text };
}

export function chart(id: string, title: string, caption: string, simulated: boolean, spec: TopLevelSpec | null): Chart {
  // Harness ids, metric names and arm pairs are long: labels are not cut short.
  const config = { legend: { labelLimit: 400 }, axis: { labelLimit: 400 }, header: { labelLimit: 400 } };
  return { id, title, caption, spec: spec === null ? null : { ...spec, title: chartTitle(title, simulated), config } };
}
