/**
 * The trajectory viewer (`harness-s ui`) over a real SIMULATED run on the
 * test stack, opened in headless Chromium (Debian's /usr/bin/chromium,
 * driven by playwright-core): every page renders without a console error or
 * a request beyond its own address, its figures are the run store's, its
 * filters and pages hold, and it neither writes nor lets a rollout's text
 * run as markup.
 */
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { serveRunStore, type Viewer } from '../../viewer/server';
import { ViewerStore } from '../../viewer/viewer-store';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const CHROMIUM = '/usr/bin/chromium';
const STEPS = 3;

let stack: TestStack;
let viewer: Viewer;
let browser: Browser;
let runId: string;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-viewer-'));
  stack = await startTestStack();
  runId = uniqueRunId('viewer');
  // Groups of 4 on the sim die often enough that every step has dead groups to route and rescue.
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: STEPS, rollout: { tasksPerStep: 6, groupSize: 4, maxTurns: 5, concurrency: 4 } }) }],
  });
  await handle.result();
  viewer = await serveRunStore({
    databaseUrl: TEST_DATABASE_URL,
    temporalAddress: TEST_TEMPORAL_ADDRESS,
    namespace: 'default',
    host: '127.0.0.1',
    port: 0,
  });
  browser = await chromium.launch({ executablePath: CHROMIUM });
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await viewer?.close();
  await stack?.close();
});

interface Visit {
  status: number;
  errors: string[];
  /** Requests the page made to anywhere but its own address. */
  elsewhere: string[];
  page: Page;
}

/** Opens a viewer address; the caller closes the page. */
async function visit(address: string): Promise<Visit> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors: string[] = [];
  const elsewhere: string[] = [];
  const url = `${viewer.url}${address}`;
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('request', (request) => {
    if (request.url() !== url) elsewhere.push(request.url());
  });
  const response = await page.goto(url, { waitUntil: 'load' });
  return { status: response?.status() ?? 0, errors, elsewhere, page };
}

async function deadTaskAt(): Promise<{ step: number; taskId: string; chosen: string[] }> {
  const decision = (await stack.store.routingDecisions(runId)).find((d) => d.outcome && Object.keys(d.outcome).length > 0);
  if (!decision) throw new Error('the run routed no dead group');
  return { step: decision.step, taskId: decision.taskId, chosen: decision.chosen };
}

function pngSize(file: string): { width: number; height: number } {
  const bytes = readFileSync(file);
  expect(bytes.subarray(1, 4).toString('latin1')).toBe('PNG');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

test('every page renders with status 200, no console error and no request beyond its own address, each run page under the SIMULATED banner', async () => {
  const dead = await deadTaskAt();
  const rescue = (await stack.store.rolloutSummaries(runId, 'train', dead.step, dead.taskId, dead.chosen))[0];
  const addresses = [
    '/runs',
    `/runs/${encodeURIComponent(runId)}`,
    `/runs/${encodeURIComponent(runId)}/steps/0`,
    `/runs/${encodeURIComponent(runId)}/steps/${dead.step}?state=rescued&outcome=success`,
    `/runs/${encodeURIComponent(runId)}/trajectories/train/${dead.step}/${encodeURIComponent(dead.taskId)}/${encodeURIComponent(rescue.harnessId)}/${rescue.sample}`,
    `/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(dead.taskId)}`,
    `/runs/${encodeURIComponent(runId)}/rollouts?role=rescue&outcome=success`,
    `/runs/${encodeURIComponent(runId)}/report`,
  ];
  for (const address of addresses) {
    const { status, errors, elsewhere, page } = await visit(address);
    const banner = await page.locator('.simulated').count();
    await page.close();
    expect({ address, status, errors, elsewhere }).toEqual({ address, status: 200, errors: [], elsewhere: [] });
    if (address !== '/runs') expect({ address, banner }).toEqual({ address, banner: 1 });
  }
});

test('the runs page lists the run with its workflow status from Temporal, its steps, a sparkline of base success per step and its links', async () => {
  const { page } = await visit('/runs');
  const row = page.locator('tr', { hasText: runId });
  const text = await row.innerText();
  const points = (await row.locator('svg.sparkline polyline').getAttribute('points'))!.trim().split(/\s+/);
  const links = (await row.locator('a').evaluateAll((as) => as.map((a) => a.getAttribute('href')!))).map(
    (h) => new URL(h, viewer.url).href,
  );
  await page.close();
  expect(text).toContain('COMPLETED');
  expect(text).toContain(`${STEPS}/${STEPS}`);
  expect(text).toContain('SIMULATED');
  expect(points).toHaveLength(STEPS);
  expect(links).toEqual(
    expect.arrayContaining([
      `${viewer.url}/runs/${encodeURIComponent(runId)}`,
      expect.stringMatching(new RegExp(`/namespaces/default/workflows/${encodeURIComponent(runId)}$`)),
      `${viewer.url}/runs/${encodeURIComponent(runId)}/report`,
    ]),
  );
});

test("a run's page shows each stored step's base success, dead, rescued and failed groups, and links each step", async () => {
  const steps = await stack.store.steps(runId);
  const { page } = await visit(`/runs/${encodeURIComponent(runId)}`);
  const rows: string[][] = [];
  for (const tr of await page.locator('section:has(h2:text-is("Steps")) tbody tr').all())
    rows.push((await tr.locator('td').allInnerTexts()).map((t) => t.trim()));
  await page.close();
  expect(rows.map((r) => [r[0], r[2], r[5], r[6], r[7]])).toEqual(
    steps.map((s) => [
      String(s.step),
      `${(s.summary.baseSuccessRate * 100).toFixed(1)}%`,
      String(s.summary.deadGroups),
      String(s.summary.rescuedGroups),
      String(s.summary.failedGroups.length),
    ]),
  );
});

test("a step's page shows a dead group's routing decision and its rescue rollouts by harness, as stored", async () => {
  const dead = await deadTaskAt();
  const decision = (await stack.store.routingDecision(runId, dead.step, dead.taskId))!;
  const { page } = await visit(`/runs/${encodeURIComponent(runId)}/steps/${dead.step}?task=${encodeURIComponent(dead.taskId)}`);
  const group = page.locator(`section.group[data-task="${dead.taskId}"]`);
  const text = await group.innerText();
  const rescueRows = await group
    .locator('h3:has-text("Rescue rollouts") + table tbody tr')
    .evaluateAll((trs) => trs.map((tr) => [tr.querySelector('td')!.textContent!.trim(), tr.querySelectorAll('td a').length]));
  await page.close();
  expect(text).toContain(`Router ${decision.strategy}`);
  for (const harness of decision.chosen) expect(text).toContain(harness);
  expect(rescueRows).toEqual(
    Object.entries(decision.outcome!)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([harness, o]) => [harness, o.rollouts]),
  );
});

test("a step's filters keep only the groups with a matching rollout, and the task search finds one task", async () => {
  const dead = await deadTaskAt();
  const rollouts = await new ViewerStore(stack.store).stepRollouts(runId, dead.step);
  const { page } = await visit(`/runs/${encodeURIComponent(runId)}/steps/${dead.step}?harness=${encodeURIComponent(dead.chosen[0])}`);
  const shown = await page.locator('section.group').evaluateAll((s) => s.map((e) => e.getAttribute('data-task')));
  await page.close();
  const expected = [...new Set(rollouts.filter((r) => r.harnessId === dead.chosen[0]).map((r) => r.taskId))].sort();
  expect(shown.sort()).toEqual(expected);

  const search = await visit(`/runs/${encodeURIComponent(runId)}/steps/${dead.step}?task=${encodeURIComponent(dead.taskId)}&state=dead`);
  const one = await search.page
    .locator('section.group')
    .evaluateAll((s) => s.map((e) => [e.getAttribute('data-task'), e.getAttribute('data-state')]));
  await search.page.close();
  // Rescued groups are dead groups that a sibling saved: the state filter says which one this was.
  const state = rollouts.some((r) => r.taskId === dead.taskId && r.role === 'rescue' && r.success) ? 'rescued' : 'dead';
  expect(one).toEqual(state === 'dead' ? [[dead.taskId, 'dead']] : []);
});

test("a trajectory's page shows every stored message, the harness's interventions where they happened, the sampled tokens with log-probs and the reward", async () => {
  const dead = await deadTaskAt();
  const rescue = (await stack.store.rolloutSummaries(runId, 'train', dead.step, dead.taskId, dead.chosen))[0];
  const stored = (await new ViewerStore(stack.store).trajectory(runId, {
    phase: 'train',
    step: dead.step,
    taskId: dead.taskId,
    harnessId: rescue.harnessId,
    sample: rescue.sample,
  }))!;
  const { page } = await visit(
    `/runs/${encodeURIComponent(runId)}/trajectories/train/${dead.step}/${encodeURIComponent(dead.taskId)}/${encodeURIComponent(rescue.harnessId)}/${rescue.sample}`,
  );
  const messages = await page.locator('.message').count();
  const marks = await page.locator('.message .intervention .badge.harness').allInnerTexts();
  const tokens = await page.locator('.tokens span[title*="log-prob"]').count();
  const reward = await page.locator('section', { hasText: 'Reward' }).first().innerText();
  await page.close();
  expect(messages).toBe(stored.messages.length);
  expect(stored.interventions!.length).toBeGreaterThan(0); // the sibling's system prompt, at least
  expect(marks).toEqual(stored.interventions!.map((i) => i.kind));
  const sampled = stored.samples.reduce((n, s) => n + s.responseMask.filter((m) => m === 1).length, 0);
  expect(tokens).toBe(sampled);
  expect(reward).toContain(`reward ${stored.reward.toFixed(3)}`);
});

test('the side-by-side page shows the task under the base harness first, under the sibling that rescued it, and under the base harness at the end', async () => {
  const dead = await deadTaskAt();
  const { page } = await visit(`/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(dead.taskId)}`);
  const columns = await page.locator('.columns > div').evaluateAll((divs) => divs.map((d) => d.querySelector('p a')?.textContent ?? ''));
  await page.close();
  expect(columns).toHaveLength(3);
  expect(columns[0]).toMatch(/^train step \d+ · base · sample \d+$/);
  expect(dead.chosen.some((h) => columns[1].includes(` · ${h} · `))).toBe(true);
  expect(columns[2]).toMatch(/^(train|eval) step \d+ · base · sample \d+$/);
});

test("the run's rollout search pages by key: the pages do not overlap and together are every match", async () => {
  const store = new ViewerStore(stack.store);
  const all: string[] = [];
  let after = null;
  for (;;) {
    const { rollouts, next } = await store.searchRollouts(runId, { phase: 'train', role: 'base' }, after, 7);
    all.push(...rollouts.map((r) => `${r.step}/${r.taskId}/${r.harnessId}/${r.sample}`));
    if (!next) break;
    after = next;
  }
  const { rows } = await stack.store.queryForTests(
    "SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1 AND phase = 'train' AND role = 'base' AND superseded_by IS NULL",
    [runId],
  );
  expect(new Set(all).size).toBe(all.length);
  expect(all).toHaveLength(rows[0].n);

  // The same through the page's next links, 20 a page.
  const { page } = await visit(`/runs/${encodeURIComponent(runId)}/rollouts?phase=train&role=base&per=20`);
  const shown: string[] = [];
  for (;;) {
    shown.push(...(await page.locator('tbody tr td:nth-child(7) a').evaluateAll((as) => as.map((a) => a.getAttribute('href')!))));
    const next = page.locator('a[rel="next"]');
    if ((await next.count()) === 0) break;
    await page.goto(`${viewer.url}${await next.getAttribute('href')}`);
  }
  await page.close();
  expect(new Set(shown).size).toBe(rows[0].n);
});

test("a rollout's text is shown as text: markup the policy wrote neither runs nor loads anything", async () => {
  const attack = '<script>document.title="owned"</script><img src="http://example.invalid/pixel.png"><a href="javascript:alert(1)">x</a>';
  await stack.store.insertTrajectories(runId, 'train', 0, 'base', [
    {
      taskId: 'attack-task',
      taskKind: 'attack',
      harnessId: 'base',
      sample: 0,
      policyVersion: 'p',
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: attack },
      ],
      samples: [],
      reward: 0,
      success: false,
      failureType: 'wrong_answer',
      turns: 1,
      tokens: 0,
      promptTokens: 0,
      completionTokens: 0,
      latencyMs: 1,
      interventions: [{ message: 1, kind: 'repair', detail: attack }],
    },
  ]);
  const { status, errors, elsewhere, page } = await visit(`/runs/${encodeURIComponent(runId)}/trajectories/train/0/attack-task/base/0`);
  const title = await page.title();
  const shown = await page.locator('.message.assistant pre').last().innerText();
  const injected = await page.locator('main img, main script, main a[href^="javascript"]').count();
  await page.close();
  expect({ status, errors, elsewhere }).toEqual({ status: 200, errors: [], elsewhere: [] });
  expect(title).not.toBe('owned');
  expect(shown).toBe(attack);
  expect(injected).toBe(0);
});

test('the viewer only reads: a POST is refused with 405, and its database sessions refuse a write', async () => {
  const response = await fetch(`${viewer.url}/runs`, { method: 'POST', body: 'x' });
  expect(response.status).toBe(405);
  expect(response.headers.get('allow')).toBe('GET, HEAD');
  const store = ViewerStore.connect(TEST_DATABASE_URL);
  try {
    await expect(store.runs.queryForTests('DELETE FROM runs WHERE run_id = $1', [runId])).rejects.toThrow(/read-only transaction/);
  } finally {
    await store.close();
  }
  expect(await stack.store.getRun(runId)).not.toBeNull();
});

test('an unknown run, step or rollout is a 404 that says what was not found', async () => {
  for (const [address, message] of [
    ['/runs/no-such-run', 'no run no-such-run in this run store'],
    [`/runs/${encodeURIComponent(runId)}/steps/999`, `has no recorded step 999`],
    [`/runs/${encodeURIComponent(runId)}/steps/x`, 'step x is not a whole number from 0 up'],
    [`/runs/${encodeURIComponent(runId)}/trajectories/train/0/nope/base/0`, 'has no train rollout of task nope'],
  ]) {
    const response = await fetch(`${viewer.url}${address}`);
    expect({ address, status: response.status }).toEqual({ address, status: 404 });
    expect(await response.text()).toContain(message);
  }
});

test('a screenshot of a step page and of a trajectory page: full pages drawn at the viewport width', async () => {
  const dead = await deadTaskAt();
  for (const [name, address] of [
    ['step', `/runs/${encodeURIComponent(runId)}/steps/${dead.step}`],
    ['side-by-side', `/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(dead.taskId)}`],
  ]) {
    const { page } = await visit(address);
    const file = path.join(dir, `${name}.png`);
    await page.screenshot({ path: file, fullPage: true });
    await page.close();
    const { width, height } = pngSize(file);
    expect({ name, width }).toEqual({ name, width: 1280 });
    expect(height).toBeGreaterThan(900);
    expect(statSync(file).size).toBeGreaterThan(50_000);
  }
});

test('the page-time bench seeds its store and times every page (here at 2,000 rollouts; docs/results.md has the figures at a million)', async () => {
  const { benchViewerPages } = await import('../../infra/bench/viewer-pages');
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `${url.pathname}_viewer_bench`;
  const timings = await benchViewerPages({ databaseUrl: url.toString(), rows: 2000, repeats: 1, log: () => undefined });
  expect(timings.map((t) => t.page)).toContain('runs');
  expect(timings.filter((t) => t.run.startsWith('viewer-bench-big (2000 rollouts)'))).toHaveLength(11);
  for (const t of timings) expect(t.medianMs).toBeGreaterThan(0);
});

test('started against a database with no run store, or none at all, the viewer says so and what to do instead of serving errors', async () => {
  const empty = new URL(TEST_DATABASE_URL);
  empty.pathname = '/postgres';
  const start = (databaseUrl: string) =>
    serveRunStore({ databaseUrl, temporalAddress: TEST_TEMPORAL_ADDRESS, namespace: 'default', host: '127.0.0.1', port: 0 });
  await expect(start(empty.toString())).rejects.toThrow(/holds no run store yet: start a worker or `harness-s dev`/);
  await expect(start('postgresql://postgres:secret@127.0.0.1:1/none')).rejects.toThrow(
    /cannot read the run store at postgresql:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/none: connect ECONNREFUSED/,
  );
});
