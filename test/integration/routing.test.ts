/**
 * The router inside a run: every strategy's decisions are recorded with what
 * the router saw, and, once the step is recorded, how each chosen sibling did.
 * Voters are real HTTP endpoints that answer as scripted.
 */
import { harnessSRun } from '../../workflows';
import type { RunConfigInput } from '../../core/config';
import { routeByValidation } from '../../core/router/validation';
import { TASK_QUEUES } from '../../workflows/definitions';
import { startVoterServer, type VoterServer } from './scripted-voter-server';
import { startTestStack, silentLogger, uniqueRunId, type TestStack } from './stack';
import { CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import { parseRunConfig } from '../../core/config';
import { createEnvironment } from '../../core/envs/registry';
import { buildProfiles } from '../../core/router/profiles';
import { TrainerSessions } from '../../core/trainer/tinker/sessions';

const SIBLINGS = ['ar-format', 'ec-docs-injected', 'ec-schema', 'ps-recipe', 'tr-budget'];
let stack: TestStack;
let voters: VoterServer;

beforeAll(async () => {
  stack = await startTestStack();
  voters = await startVoterServer({
    'prefers-budget': { content: '{"ranking": ["tr-budget", "ar-format", "ps-recipe"]}' },
    'prefers-format': { content: 'Sure: {"ranking": ["ar-format", "ps-recipe"]}' },
    down: { status: 503, error: 'voter is down' },
    rambling: { content: 'The schema harness looks best to me.' },
    slow: { content: '{"ranking": ["tr-budget", "ar-format"]}', delayMs: 5000 },
  });
});
afterAll(async () => {
  await voters?.close();
  await stack?.close();
});

async function runToEnd(prefix: string, overrides: Partial<RunConfigInput>) {
  const runId = uniqueRunId(prefix);
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ eval: { enabled: false }, ...overrides }) }],
  });
  await handle.result();
  const steps = (await stack.store.steps(runId)).map((s) => s.summary);
  const decisions = await stack.store.routingDecisions(runId);
  return { runId, steps, decisions };
}

test('every dead group routed by the validation rule is recorded with its profile version and failure summary, then with how each chosen sibling did', async () => {
  const { runId, steps, decisions } = await runToEnd('route-validation', { steps: 2 });
  expect(decisions.length).toBe(steps.reduce((n, s) => n + s.deadGroups, 0));
  expect(decisions.length).toBeGreaterThan(0);
  for (const d of decisions) {
    expect(d).toMatchObject({ strategy: 'validation', profileVersion: 1, fallback: false, votes: [] });
    expect(steps[d.step].deadTaskIds).toContain(d.taskId);
    expect(d.chosen).toHaveLength(2);
    expect(d.failureSummary).toMatch(/^4\/4 base attempts failed: /);
    expect(d.failureDigest).toMatch(/^[0-9a-f]{16}$/);
    // The outcome is what the stored rescue rollouts show: G/k = 2 per chosen sibling.
    expect(Object.keys(d.outcome ?? {}).sort()).toEqual([...d.chosen].sort());
    const { rows } = await stack.store.queryForTests(
      `SELECT harness_id, count(*)::int AS n, (count(*) FILTER (WHERE success))::int AS ok FROM trajectories
       WHERE run_id = $1 AND phase = 'train' AND step = $2 AND task_id = $3 AND role = 'rescue' GROUP BY harness_id`,
      [runId, d.step, d.taskId],
    );
    for (const row of rows) expect(d.outcome![row.harness_id]).toEqual({ rollouts: 2, successes: row.ok });
  }
});

test('the random strategy picks k distinct siblings per dead group, the same ones when the run is repeated', async () => {
  const first = await runToEnd('route-random', { steps: 1, router: { strategy: 'random', probeTasksPerKind: 1, probeRollouts: 2 } });
  const again = await runToEnd('route-random', { steps: 1, router: { strategy: 'random', probeTasksPerKind: 1, probeRollouts: 2 } });
  expect(first.decisions.length).toBeGreaterThan(0);
  for (const d of first.decisions) {
    expect(d.strategy).toBe('random');
    expect(new Set(d.chosen).size).toBe(2);
    for (const id of d.chosen) expect(SIBLINGS).toContain(id);
  }
  expect(again.decisions.map((d) => [d.taskId, d.chosen])).toEqual(first.decisions.map((d) => [d.taskId, d.chosen]));
});

test('the all strategy sends a dead group to every sibling while the rescue group keeps size G', async () => {
  const { runId, decisions } = await runToEnd('route-all', {
    steps: 1,
    rollout: { tasksPerStep: 4, groupSize: 5, maxTurns: 5, concurrency: 4 },
    router: { strategy: 'all', probeTasksPerKind: 1, probeRollouts: 2 },
  });
  expect(decisions.length).toBeGreaterThan(0);
  for (const d of decisions) {
    expect(d.chosen.sort()).toEqual(SIBLINGS);
    const { rows } = await stack.store.queryForTests(
      `SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1 AND phase = 'train' AND task_id = $2 AND role = 'rescue'`,
      [runId, d.taskId],
    );
    expect(rows[0].n).toBe(5);
  }
});

test('the vote strategy drops a failing voter with its reason and ranks by the remaining ballots (Borda count)', async () => {
  const { decisions } = await runToEnd('route-vote', {
    steps: 1,
    router: {
      strategy: 'vote',
      probeTasksPerKind: 1,
      probeRollouts: 2,
      voters: [
        { baseUrl: voters.baseUrl, model: 'prefers-budget' },
        { baseUrl: voters.baseUrl, model: 'prefers-format' },
        { baseUrl: voters.baseUrl, model: 'down' },
      ],
    },
  });
  expect(decisions.length).toBeGreaterThan(0);
  for (const d of decisions) {
    expect(d).toMatchObject({ strategy: 'vote', fallback: false });
    expect(d.votes.map((v) => (v.ok ? v.ranking : v.reason))).toEqual([
      ['tr-budget', 'ar-format', 'ps-recipe'],
      ['ar-format', 'ps-recipe'],
      'HTTP 503: voter is down',
    ]);
    // Borda with 5 candidates: ar-format 4 + 5 = 9, tr-budget 5, ps-recipe 3 + 4 = 7.
    expect(d.chosen).toEqual(['ar-format', 'ps-recipe']);
    expect(d.scores).toMatchObject({ 'ar-format': 9, 'ps-recipe': 7, 'tr-budget': 5 });
  }
  const prompts = voters.requests.filter((r) => r.model === 'prefers-budget').map((r) => r.messages[1].content);
  expect(prompts.some((p) => p.includes('[SIMULATED] Task') && p.includes('base attempts failed'))).toBe(true);
});

test('when no voter answers usably, the validation rule decides and the decision is flagged', async () => {
  const { runId, decisions } = await runToEnd('route-vote-fallback', {
    steps: 1,
    router: {
      strategy: 'vote',
      probeTasksPerKind: 1,
      probeRollouts: 2,
      voters: [
        { baseUrl: voters.baseUrl, model: 'down' },
        { baseUrl: voters.baseUrl, model: 'rambling' },
      ],
    },
  });
  expect(decisions.length).toBeGreaterThan(0);
  const profiles = await stack.store.profiles(runId, 1);
  for (const d of decisions) {
    expect(d).toMatchObject({ strategy: 'vote', fallback: true });
    expect(d.votes.map((v) => !v.ok && v.reason)).toEqual(['HTTP 503: voter is down', 'no JSON object in the answer']);
    expect(d.chosen).toEqual(
      routeByValidation(profiles!, SIBLINGS, { taskId: d.taskId, kind: d.kind, failureCounts: d.failureCounts }, 2).chosen,
    );
  }
});

test('a vote cut short by cancellation (a worker shutting down) is not recorded, so the retry asks the voters again', async () => {
  const runId = uniqueRunId('route-vote-cancel');
  const config = parseRunConfig(stack.config({ router: { strategy: 'vote', voters: [{ baseUrl: voters.baseUrl, model: 'slow' }] } }));
  await stack.store.registerRun({ runId, name: config.name, env: 'sim', config, incarnation: 'test', takeOver: false });
  await stack.store.saveProfiles(runId, buildProfiles([], { version: 1, policyVersion: 'sim-policy-base', priorStrength: 2 }));
  const activities = createActivities({
    store: stack.store,
    logger: silentLogger,
    environmentFor: (c) => createEnvironment(c.env),
    trainerSessions: new TrainerSessions(silentLogger),
  });
  const env = new MockActivityEnvironment();
  const routing = env.run(activities.chooseRescueHarnesses, {
    runId,
    step: 0,
    profileVersion: 1,
    group: { taskId: 'lookup-000', kind: 'lookup', failureCounts: { wrong_answer: 4 } },
  });
  setTimeout(() => env.cancel(), 200);
  await expect(routing).rejects.toBeInstanceOf(CancelledFailure);
  expect(await stack.store.routingDecisions(runId)).toEqual([]);
});
