/**
 * The run's own page in the Temporal Web UI (headless Chromium, the dev
 * server's UI): a run started without the CLI's summary (as from the UI's
 * Start Workflow form or the `temporal` CLI) reads as "Harness-S run NAME",
 * and while a step runs, its groups done and rescues started show there, not
 * only on the step's page.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { chromium, type Browser } from 'playwright-core';
import { findTemporalCli } from '../../infra/temporal-cli';
import { uiUrlFor } from '../../infra/temporal-dev-server';
import { TEST_TEMPORAL_ADDRESS } from './env';
import { startFaultProxy, type FaultProxy } from './fault-proxy';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

let stack: TestStack;
let browser: Browser;
let slowPolicy: FaultProxy;

beforeAll(async () => {
  stack = await startTestStack();
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  slowPolicy = await startFaultProxy(stack.sim.url);
});
afterAll(async () => {
  await browser?.close();
  await slowPolicy?.close();
  await stack?.close();
});

test("a run started from outside the CLI shows what it is and its running step's progress on its own page", async () => {
  const runId = uniqueRunId('web-ui');
  // Each chat completion waits a little, so a step lasts long enough to be seen mid-way.
  for (let i = 0; i < 2000; i++) slowPolicy.faults.push({ match: (_m, p) => p === '/v1/chat/completions', delayMs: 400 });
  const input = {
    config: stack.config({ name: 'from-the-ui', steps: 2, policy: { baseUrl: `${slowPolicy.url}/v1` }, eval: { enabled: false } }),
  };
  await promisify(execFile)(findTemporalCli()!.path, [
    'workflow',
    'start',
    '--address',
    TEST_TEMPORAL_ADDRESS,
    '--type',
    'harnessSRun',
    '--task-queue',
    'harness-s-control',
    '--workflow-id',
    runId,
    '--input',
    JSON.stringify(input),
  ]);
  const page = await browser.newPage();
  try {
    const url = `${uiUrlFor(TEST_TEMPORAL_ADDRESS)}/namespaces/default/workflows/${encodeURIComponent(runId)}`;
    const deadline = Date.now() + 60_000;
    let text = '';
    while (Date.now() < deadline && !/base groups done/.test(text)) {
      await page.goto(url, { waitUntil: 'domcontentloaded' });
      // The UI shows a workflow's current details on its User Metadata tab (it queries the running workflow).
      await page
        .getByRole('link', { name: 'User Metadata' })
        .or(page.getByRole('tab', { name: 'User Metadata' }))
        .first()
        .click();
      for (let i = 0; i < 20 && !/base groups done/.test(text); i++) {
        await page.waitForTimeout(250);
        // The UI renders details (markdown) inside a sandboxed frame.
        const texts = await Promise.all(
          page.frames().map((f) =>
            f
              .locator('body')
              .innerText()
              .catch(() => ''),
          ),
        );
        text = texts.find((t) => t.includes('Harness-S run from-the-ui'))?.trim() ?? '';
      }
    }
    expect(text).toMatch(/^Harness-S run from-the-ui \(sim, SIMULATED\)\s+step/);
    // The UI's markdown typesets "4/4" with a fraction slash.
    expect(text).toMatch(/step \d[/⁄]2, policy [^:]+: \d+[/⁄]4 base groups done, \d+ rescues started/);
  } finally {
    await page.close();
  }
  await stack.client.workflow.getHandle(runId).result();
}, 120_000);
