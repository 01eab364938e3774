/**
 * The HTML reports of real runs, opened in a headless Chromium (Debian's
 * /usr/bin/chromium, driven by playwright-core): a SIMULATED run with an
 * evaluation every step and re-anchored profiles, its report written by
 * `harness-s report`, and a compare of 2 arms x 2 seeds.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { chromium, type Browser } from 'playwright-core';
import { planCompare, runCompare } from '../../cli/compare';
import { writeCompareReport } from '../../cli/report/compare-report';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const ROOT = path.resolve(__dirname, '..', '..');
const CHROMIUM = '/usr/bin/chromium';
const RUN_CHARTS = ['step-success', 'evaluation', 'dead-rescued', 'rescue-heatmap', 'router-picks', 'trainer-metrics', 'logprob-mismatch'];
const COMPARE_CHARTS = ['base-success', 'live-groups', 'success-by-rollouts', 'success-by-tokens', 'eval-end', 'differences'];

function harnessS(...args: string[]) {
  return promisify(execFile)(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['cli/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, TEMPORAL_ADDRESS: TEST_TEMPORAL_ADDRESS, DATABASE_URL: TEST_DATABASE_URL, LOG_LEVEL: 'warn' },
  });
}

let stack: TestStack;
let browser: Browser;
let dir: string;
let runId: string;
let runReport: string;
let compareReport: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-report-'));
  stack = await startTestStack();
  runId = uniqueRunId('report');
  const config = stack.config({
    steps: 3,
    eval: { tasksPerKind: 1, rollouts: 2, every: 1 },
    router: { probeTasksPerKind: 1, probeRollouts: 2, reanchorEvery: 2 },
  });
  const run = stack.client.workflow
    .start(harnessSRun, { workflowId: runId, taskQueue: TASK_QUEUES.control, args: [{ config }] })
    .then((handle) => handle.result());
  const plan = planCompare(stack.config({ steps: 2 }), ['policy-only', 'harness-s'], [1, 2]);
  const compare = runCompare({ client: stack.client, plan, parallel: 4, progress: () => undefined });
  const [, result] = await Promise.all([run, compare]);
  expect(result.failures).toEqual([]);

  // The run's report through the CLI, as a user writes it (vega loaded by native import()).
  runReport = (await harnessS('report', runId, '--out', path.join(dir, 'run'))).stdout.trim();
  compareReport = await writeCompareReport({ store: stack.store, result, dir: path.join(dir, 'compare') });
  browser = await chromium.launch({ executablePath: CHROMIUM });
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

interface FigureView {
  id: string;
  svgs: number;
  marks: number;
  width: number;
  height: number;
}

/** Opens a report; returns its console errors, the requests it made, and each chart's SVG as drawn. */
async function openReport(file: string, screenshot: string) {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors: string[] = [];
  const requests: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('request', (request) => requests.push(request.url()));
  await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  const figures: FigureView[] = await page.$$eval('figure.chart', (elements) =>
    elements.map((figure) => {
      const svg = figure.querySelector('svg');
      const box = svg?.getBoundingClientRect();
      return {
        id: figure.id,
        svgs: figure.querySelectorAll('svg').length,
        // Drawn data marks: paths, rects, lines or text inside Vega's mark groups.
        marks: svg ? svg.querySelectorAll('.role-mark path, .role-mark rect, .role-mark line, .role-mark text').length : 0,
        width: box?.width ?? 0,
        height: box?.height ?? 0,
      };
    }),
  );
  const banner = await page.locator('.simulated').isVisible();
  await page.screenshot({ path: screenshot, fullPage: true });
  await page.close();
  return { errors, requests, figures, banner };
}

/** Width and height from a PNG's IHDR chunk. */
function pngSize(file: string): { width: number; height: number } {
  const bytes = readFileSync(file);
  expect(bytes.subarray(1, 4).toString('latin1')).toBe('PNG');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

test("`harness-s report` writes the run's page, which Chromium opens without a console error or any request beyond the file", async () => {
  expect(runReport).toBe(path.join(dir, 'run', 'index.html'));
  const { errors, requests, banner } = await openReport(runReport, path.join(dir, 'run.png'));
  expect(errors).toEqual([]);
  expect(requests).toEqual([pathToFileURL(runReport).href]);
  expect(banner).toBe(true); // SIMULATED
});

test('every chart of the run report is an SVG with drawn marks: success, evaluations, dead groups, heatmaps per profile version, router picks, trainer metrics, mismatch', async () => {
  const { figures } = await openReport(runReport, path.join(dir, 'run.png'));
  expect(figures.map((f) => f.id)).toEqual(RUN_CHARTS);
  for (const figure of figures) {
    expect({ id: figure.id, svgs: figure.svgs, hasMarks: figure.marks > 0 }).toEqual({ id: figure.id, svgs: 1, hasMarks: true });
    expect(figure.width).toBeGreaterThan(100);
    expect(figure.height).toBeGreaterThan(100);
  }
  const html = readFileSync(runReport, 'utf8');
  // Re-anchored after step 1: two profile versions, one heatmap panel each.
  expect(html).toContain('v1 · base policy');
  expect(html).toContain('v2 · after step 1');
  // eval.every 1: after 1, 2 and 3 steps trained.
  expect((await stack.store.evaluations(runId)).map((e) => e.afterSteps)).toEqual([1, 2, 3]);
});

test('a screenshot of the run report is a full page of charts', async () => {
  const file = path.join(dir, 'run.png');
  await openReport(runReport, file);
  const { width, height } = pngSize(file);
  expect(width).toBe(1200);
  expect(height).toBeGreaterThan(2500);
  expect(statSync(file).size).toBeGreaterThan(100_000);
});

test('the compare report opens without a console error, draws every chart with marks, and its screenshot is a full page', async () => {
  const file = path.join(dir, 'compare.png');
  const { errors, requests, figures, banner } = await openReport(compareReport, file);
  expect(errors).toEqual([]);
  expect(requests).toEqual([pathToFileURL(compareReport).href]);
  expect(banner).toBe(true);
  expect(figures.map((f) => f.id)).toEqual(COMPARE_CHARTS);
  for (const figure of figures) {
    expect({ id: figure.id, svgs: figure.svgs, hasMarks: figure.marks > 0 }).toEqual({ id: figure.id, svgs: 1, hasMarks: true });
  }
  const html = readFileSync(compareReport, 'utf8');
  expect(html).toContain('harness-s - policy-only');
  const { width, height } = pngSize(file);
  expect(width).toBe(1200);
  expect(height).toBeGreaterThan(1500);
  expect(statSync(file).size).toBeGreaterThan(50_000);
});

test('`harness-s report` of a run the store does not have says so and exits 2', async () => {
  const failed = await harnessS('report', 'no-such-run', '--out', path.join(dir, 'none')).catch(
    (err: { code: number; stderr: string }) => err,
  );
  expect(failed).toMatchObject({ code: 2, stderr: expect.stringContaining('no run no-such-run in the run store') });
});
