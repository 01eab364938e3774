/**
 * A Vega-Lite spec to SVG, without a browser: compiled by vega-lite, rendered
 * by a headless vega View.
 *
 * Both packages are ES modules only, and vega's canvas module awaits at its top
 * level, so this CommonJS project cannot require() them (Node 20's require of
 * an ES module refuses top-level await): they are loaded once with import().
 * Jest compiles them to CommonJS instead (jest.config.js).
 */
import type * as VegaModule from 'vega';
import type * as VegaLiteModule from 'vega-lite/build/index';
import type { TopLevelSpec } from 'vega-lite/build/index';

export type { TopLevelSpec };

// By a variable: the project resolves modules the Node 10 way, which does not
// read vega-lite's `exports`, so its types are named by path above.
const VEGA_LITE: string = 'vega-lite';

let modules: Promise<{ vega: typeof VegaModule; vegaLite: typeof VegaLiteModule }> | null = null;

function loadVega(): Promise<{ vega: typeof VegaModule; vegaLite: typeof VegaLiteModule }> {
  modules ??= Promise.all([import('vega'), import(VEGA_LITE) as Promise<typeof VegaLiteModule>]).then(([vega, vegaLite]) => ({
    vega,
    vegaLite,
  }));
  return modules;
}

export interface RenderedChart {
  svg: string;
  /** What Vega-Lite or Vega warned about while compiling and rendering (a spec it had to correct). */
  warnings: string[];
}

export async function renderSvg(spec: TopLevelSpec): Promise<RenderedChart> {
  const { vega, vegaLite } = await loadVega();
  const warnings: string[] = [];
  const logger = vega.logger(vega.Warn, undefined, (_method, level, input) => {
    warnings.push(`${level} ${input.map(String).join(' ')}`);
  });
  const compiled = vegaLite.compile(spec, { logger }).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none', logger });
  try {
    return { svg: await view.toSVG(), warnings };
  } finally {
    view.finalize();
  }
}
