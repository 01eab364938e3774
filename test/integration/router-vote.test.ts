/**
 * The vote strategy's voters against a real OpenAI-compatible HTTP server whose
 * models misbehave as scripted: each failure costs only that voter's ballot.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { VoterConfig } from '../../core/config';
import { buildProfiles } from '../../core/router/profiles';
import { collectVotes, failureSummary, voterLabel, type VoteContext } from '../../core/router/vote';
import { startVoterServer, type VoterAnswer, type VoterServer } from './scripted-voter-server';

const SLOW_DELAY_MS = 1500;

/** Each model is one way a voter can behave. */
const VOTERS: Record<string, VoterAnswer> = {
  good: { content: '{"ranking": ["ec-schema", "ps-recipe"]}' },
  'http-500': { status: 500, error: 'voter overloaded' },
  slow: { content: '{"ranking": ["tr-budget"]}', delayMs: SLOW_DELAY_MS },
  prose: { content: 'I would retry with the schema harness first, then the recipe.' },
  'bad-schema': { content: '{"ranking": "ec-schema"}' },
  unknown: { content: '{"ranking": ["ec-schema", "ar-format"]}' },
  empty: { content: '' },
};

const profiles = buildProfiles(
  [
    {
      taskId: 'probe-1',
      kind: 'lookup',
      baseHarnessId: 'base',
      base: [{ success: false, failureType: 'wrong_answer', turns: 3 }],
      siblings: {
        'ec-schema': [
          { success: true, turns: 4, tokens: 40 },
          { success: true, turns: 4, tokens: 40 },
        ],
        'ps-recipe': [
          { success: false, turns: 5, tokens: 50 },
          { success: true, turns: 5, tokens: 50 },
        ],
      },
    },
  ],
  { version: 1, policyVersion: 'base', priorStrength: 2 },
);

const context: VoteContext = {
  taskId: 'lookup-42',
  kind: 'lookup',
  taskText: 'Which warehouse shipped the most units of SKU-7731 in Q3? Answer with the warehouse code.',
  group: { taskId: 'lookup-42', kind: 'lookup', failureCounts: { wrong_answer: 6, turn_limit: 2 } },
  siblings: [
    { id: 'ec-schema', direction: 'environment_contract', description: 'Shows the table schema contract.' },
    { id: 'ps-recipe', direction: 'procedural_skill', description: 'A worked recipe: plan, compute, verify.' },
    { id: 'tr-budget', direction: 'trajectory_regulation', description: 'Two more turns, verify before finishing.' },
  ],
  profiles,
  k: 2,
};

let server: VoterServer;
const voter = (model: string, timeoutSeconds = 5): VoterConfig => ({ baseUrl: server.baseUrl, model, timeoutSeconds });

beforeAll(async () => {
  server = await startVoterServer(VOTERS);
});

afterAll(async () => {
  await server.close();
});

/** Asks the good voter together with `failing`; the good ballot must count whatever the other does. */
async function voteAlongsideGood(failing: VoterConfig) {
  const [good, other] = await collectVotes([voter('good'), failing], context);
  expect(good).toMatchObject({ voter: voterLabel(voter('good')), ok: true, ranking: ['ec-schema', 'ps-recipe'] });
  return other;
}

test('a voter answering HTTP 500 is dropped with the status and the server message', async () => {
  expect(await voteAlongsideGood(voter('http-500'))).toMatchObject({
    voter: `http-500@${server.baseUrl}`,
    ok: false,
    reason: 'HTTP 500: voter overloaded',
  });
});

test('a voter slower than its timeout is dropped at the deadline, without waiting for its answer', async () => {
  const slow = await voteAlongsideGood(voter('slow', 0.3));
  expect(slow).toMatchObject({ ok: false, reason: 'timed out after 0.3s' });
  expect(slow.latencyMs).toBeGreaterThanOrEqual(250);
  expect(slow.latencyMs).toBeLessThan(SLOW_DELAY_MS);
});

test('a voter answering in prose without JSON is dropped', async () => {
  expect(await voteAlongsideGood(voter('prose'))).toMatchObject({ ok: false, reason: 'no JSON object in the answer' });
});

test('a voter whose ranking is not a list is dropped, saying where the answer left the schema', async () => {
  expect(await voteAlongsideGood(voter('bad-schema'))).toMatchObject({
    ok: false,
    reason: 'answer out of schema: ranking: Invalid input: expected array, received string',
  });
});

test('a voter naming a harness that is not a sibling is dropped, with the valid ids', async () => {
  expect(await voteAlongsideGood(voter('unknown'))).toMatchObject({
    ok: false,
    reason: 'unknown harness ids: ar-format (valid: ec-schema, ps-recipe, tr-budget)',
  });
});

test('a voter with an empty answer is dropped', async () => {
  expect(await voteAlongsideGood(voter('empty'))).toMatchObject({ ok: false, reason: 'empty answer' });
});

test('a voter whose endpoint refuses the connection is dropped with the cause', async () => {
  const unreachable = await new Promise<string>((resolve) => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(`http://127.0.0.1:${port}/v1`));
    });
  });
  const refused = await voteAlongsideGood({ ...voter('good'), baseUrl: unreachable });
  expect(refused.ok).toBe(false);
  expect(!refused.ok && refused.reason).toMatch(/^request failed: .*ECONNREFUSED/);
});

test('aborting the signal cancels every voter, and the call still resolves', async () => {
  const controller = new AbortController();
  const votes = collectVotes([voter('slow'), voter('slow')], context, { signal: controller.signal });
  setTimeout(() => controller.abort(), 100);
  const outcomes = await votes;
  expect(outcomes.map((o) => (o.ok ? 'ok' : o.reason))).toEqual([
    'cancelled before the voter answered',
    'cancelled before the voter answered',
  ]);
});

test('every voter is sent the task text and the failure summary, at temperature 0', async () => {
  const before = server.requests.length;
  await collectVotes([voter('good'), voter('prose')], context);
  const sent = server.requests.slice(before);
  expect(sent.map((r) => r.model).sort()).toEqual(['good', 'prose']);
  for (const request of sent) {
    expect(request.temperature).toBe(0);
    expect(request.messages.map((m) => m.role)).toEqual(['system', 'user']);
    const user = request.messages[1].content;
    expect(user).toContain(context.taskText);
    expect(user).toContain(failureSummary(context.group));
    expect(user).toContain('8/8 base attempts failed: wrong_answer x6, turn_limit x2');
  }
});
