/**
 * API keys stay out of everything Temporal and the run store keep. A run
 * whose policy, trainer and voter endpoints all demand a key (they answer 401
 * without it) names the key by its environment variable; the workers read it.
 * Then the raw bytes of every workflow history of the run and its children
 * (continue-as-new executions and an update included), the Web UI's API
 * answers about them, and every table of the run store are searched for the
 * key: none holds it. Each search also finds the variable's name, so it does
 * look inside payloads.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { temporal } from '@temporalio/proto';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES, updateConfigUpdate } from '../../workflows/definitions';
import { uiUrlFor } from '../../infra/temporal-dev-server';
import { TEST_TEMPORAL_ADDRESS } from './env';
import { startFaultProxy, type FaultProxy } from './fault-proxy';
import { startVoterServer, type VoterServer } from './scripted-voter-server';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const KEY = `sk-test-${randomBytes(12).toString('hex')}`;
const KEY_ENV = 'HARNESS_S_TEST_ENDPOINT_API_KEY';
let stack: TestStack;
let endpoint: FaultProxy;
let voters: VoterServer;

beforeAll(async () => {
  process.env[KEY_ENV] = KEY; // the in-process workers' environment
  stack = await startTestStack();
  endpoint = await startFaultProxy(stack.sim.url, { requireKey: KEY });
  voters = await startVoterServer({ judge: { content: '{"ranking": ["ec-schema", "ps-recipe", "tr-budget"]}' } }, { requireKey: KEY });
});
afterAll(async () => {
  await voters?.close();
  await endpoint?.close();
  await stack?.close();
  delete process.env[KEY_ENV];
});

/** Whether `text` holds `needle` as is, or inside one of its base64 strings (how JSON APIs carry payloads). */
function holds(text: string, needle: string): boolean {
  if (text.includes(needle)) return true;
  const strings = text.match(/"[A-Za-z0-9+/=_-]{16,}"/g) ?? [];
  return strings.some((s) => Buffer.from(s.slice(1, -1), 'base64').toString('utf8').includes(needle));
}

test('a run whose endpoints need a key keeps it out of every history, the Web UI and the run store', async () => {
  const runId = uniqueRunId('secrets');
  const config = stack.config({
    steps: 4,
    policy: { baseUrl: `${endpoint.url}/v1`, apiKeyEnv: KEY_ENV },
    trainer: { baseUrl: endpoint.url, pollSeconds: 0.02, apiKeyEnv: KEY_ENV },
    router: {
      strategy: 'vote',
      voters: [{ baseUrl: voters.baseUrl, model: 'judge', apiKeyEnv: KEY_ENV }],
      probeTasksPerKind: 1,
      probeRollouts: 2,
    },
  });
  const handle = await stack.client.workflow.start(harnessSRun, { workflowId: runId, taskQueue: TASK_QUEUES.control, args: [{ config }] });
  await handle.executeUpdate(updateConfigUpdate, { args: [{ steps: 5 }] });
  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(5);
  // The key was needed and sent: every endpoint answered the run's requests (a 401 would have failed it).
  expect(endpoint.seen.some((s) => s.startsWith('POST /v1/chat/completions'))).toBe(true);
  expect(endpoint.seen.some((s) => s.startsWith('POST /api/v1/forward_backward'))).toBe(true);
  expect(voters.requests.length).toBeGreaterThan(0);

  // Temporal: every execution of the run and of its children, as raw history bytes.
  const executions: Array<{ workflowId: string; runId: string }> = [];
  for await (const w of stack.client.workflow.list({ query: `StartTime > '${new Date(Date.now() - 3_600_000).toISOString()}'` })) {
    if (w.workflowId === runId || w.workflowId.startsWith(`${runId}/`)) executions.push({ workflowId: w.workflowId, runId: w.runId });
  }
  expect(executions.filter((e) => e.workflowId === runId).length).toBeGreaterThan(1); // it continued as new
  expect(executions.some((e) => e.workflowId.includes('/step-'))).toBe(true);
  for (const e of executions) {
    const history = await stack.client.workflow.getHandle(e.workflowId, e.runId).fetchHistory();
    const bytes = Buffer.from(temporal.api.history.v1.History.encode(history).finish());
    expect({ ...e, key: bytes.includes(KEY) }).toEqual({ ...e, key: false });
    if (e.workflowId === runId) expect(bytes.includes(KEY_ENV)).toBe(true);
  }

  // The Web UI's API: the run list, and each execution's description and history, as the UI fetches them.
  const ui = `${uiUrlFor(TEST_TEMPORAL_ADDRESS)}/api/v1/namespaces/default`;
  const answers: Array<{ url: string; text: string }> = [];
  const get = async (url: string) => {
    const response = await fetch(url);
    expect({ url, status: response.status }).toEqual({ url, status: 200 });
    answers.push({ url, text: await response.text() });
  };
  await get(`${ui}/workflows?query=${encodeURIComponent(`WorkflowId = '${runId}'`)}`);
  for (const e of executions) {
    const id = encodeURIComponent(e.workflowId);
    await get(`${ui}/workflows/${id}?execution.runId=${e.runId}`);
    await get(`${ui}/workflows/${id}/history?execution.runId=${e.runId}`);
  }
  for (const a of answers) expect({ url: a.url, key: holds(a.text, KEY) }).toEqual({ url: a.url, key: false });
  expect(answers.some((a) => holds(a.text, KEY_ENV))).toBe(true);

  // The run store: every row of every table, as text.
  const { rows: tables } = await stack.store.queryForTests<{ name: string }>(
    `SELECT quote_ident(table_name) AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
  );
  let rowsHoldingEnvName = 0;
  for (const { name } of tables) {
    const { rows } = await stack.store.queryForTests<{ key: number; env: number }>(
      `SELECT count(*) FILTER (WHERE t::text LIKE $1)::int AS key, count(*) FILTER (WHERE t::text LIKE $2)::int AS env FROM ${name} t`,
      [`%${KEY}%`, `%${KEY_ENV}%`],
    );
    expect({ table: name, rows: rows[0].key }).toEqual({ table: name, rows: 0 });
    rowsHoldingEnvName += rows[0].env;
  }
  expect(rowsHoldingEnvName).toBeGreaterThan(0);
}, 180_000);

test('without the variable set, the run fails at once naming the variable, not the key', async () => {
  const config = stack.config({ steps: 1, policy: { baseUrl: `${endpoint.url}/v1`, apiKeyEnv: 'HARNESS_S_TEST_UNSET_API_KEY' } });
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: uniqueRunId('secrets-unset'),
    taskQueue: TASK_QUEUES.control,
    args: [{ config }],
  });
  const failure = await handle.result().then(
    () => null,
    (err: Error) => err,
  );
  expect(String((failure?.cause as Error | undefined)?.message)).toMatch(
    /policy\.apiKeyEnv names \$HARNESS_S_TEST_UNSET_API_KEY, which is not set/,
  );
});

test('a config whose apiKeyEnv names a worker variable that is not a key fails the run at once, and its endpoint never sees the value', async () => {
  const seen: string[] = [];
  const listener = createServer((req, res) => {
    seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''}`);
    res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
  try {
    const config = stack.config({ steps: 1, policy: { baseUrl: `${url}/v1`, apiKeyEnv: 'DATABASE_URL' } });
    const handle = await stack.client.workflow.start(harnessSRun, {
      workflowId: uniqueRunId('secrets-refused'),
      taskQueue: TASK_QUEUES.control,
      args: [{ config }],
    });
    const failure = await handle.result().then(
      () => null,
      (err: Error) => err,
    );
    expect(String((failure?.cause as Error | undefined)?.message)).toMatch(
      /policy\.apiKeyEnv names \$DATABASE_URL, which is not read as an API key/,
    );
    expect(seen).toEqual([]);
  } finally {
    await new Promise((resolve) => listener.close(resolve));
  }
});
