/**
 * evaluatePolicy: on its cadence and at the end of a run, the policy is judged
 * on held-out tasks under the base harness and under Rank-1 routing, with the
 * same executor rollouts per task in both.
 */
import { harnessSRun } from '../../workflows';
import { rank1Harness } from '../../core/router/rank1';
import { statusQuery, TASK_QUEUES, type RunSummary } from '../../workflows/definitions';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import { parseRunConfig, type RunConfig } from '../../core/config';
import { createEnvironment } from '../../core/envs/registry';
import { drawDistinct, splitTasks } from '../../core/rl/task-sampling';
import { startTestStack, silentLogger, uniqueRunId, type TestStack } from './stack';
import { TrainerSessions } from '../../core/trainer/tinker/sessions';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(async () => {
  await stack?.close();
});

test('evaluations run every N steps and at the end, on held-out tasks, with equal rollouts per task for the base harness and Rank-1', async () => {
  const runId = uniqueRunId('eval');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: 3, eval: { every: 2, tasksPerKind: 2, rollouts: 3 } }) }],
  });
  const summary: RunSummary = await handle.result();

  const evaluations = await stack.store.evaluations(runId);
  expect(evaluations.map((e) => e.afterSteps)).toEqual([2, 3]);
  expect(evaluations.map((e) => e.policyVersion)).toEqual([
    (await stack.store.trainerStep(runId, 1))!.policyVersion,
    (await stack.store.trainerStep(runId, 2))!.policyVersion,
  ]);
  const profiles = await stack.store.profiles(runId, 1);
  const pool = ['base', 'ar-format', 'ec-docs-injected', 'ec-schema', 'ps-recipe', 'tr-budget'];
  for (const e of evaluations) {
    expect(e.tasks).toBe(8); // 4 kinds x 2
    expect(e.base.rollouts).toBe(8 * 3);
    expect(e.rank1.rollouts).toBe(8 * 3);
    for (const [kind, harness] of Object.entries(e.rank1Routes)) expect(harness).toBe(rank1Harness(profiles!, pool, 'base', kind));
    // What the store holds: per task, 3 rollouts under the base harness and 3 under its kind's Rank-1 harness.
    const { rows } = await stack.store.queryForTests(
      `SELECT task_id, task_kind, harness_id, count(*)::int AS n FROM trajectories
       WHERE run_id = $1 AND phase = 'eval' AND step = $2 GROUP BY task_id, task_kind, harness_id`,
      [runId, e.afterSteps],
    );
    for (const row of rows) expect(row.n).toBe(3);
    for (const row of rows) expect(['base', e.rank1Routes[row.task_kind]]).toContain(row.harness_id);
    const tasks = new Set(rows.map((r) => r.task_id));
    expect(tasks.size).toBe(8);
  }

  // Held out: no eval task was trained or probed on.
  const { rows: overlap } = await stack.store.queryForTests(
    `SELECT DISTINCT e.task_id FROM trajectories e JOIN trajectories t ON t.run_id = e.run_id AND t.task_id = e.task_id AND t.phase <> 'eval'
     WHERE e.run_id = $1 AND e.phase = 'eval'`,
    [runId],
  );
  expect(overlap).toEqual([]);

  expect(summary.evaluations).toHaveLength(2);
  expect(summary.baseEvalEnd).toBe(evaluations[1].base.successRate);
  expect(summary.rank1EvalEnd).toBe(evaluations[1].rank1.successRate);
  const status = await handle.query(statusQuery);
  expect(status.lastEvaluation).toEqual(evaluations[1]);
});

test('with evaluation off, a run has no evaluation and its summary says so', async () => {
  const runId = uniqueRunId('eval-off');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: 1, eval: { enabled: false } }) }],
  });
  const summary: RunSummary = await handle.result();
  expect(await stack.store.evaluations(runId)).toEqual([]);
  expect(summary).toMatchObject({ evaluations: [], baseEvalEnd: null, rank1EvalEnd: null });
});

test('a run begun before evaluation existed keeps training on every task, also once it continues as new, and does not evaluate', async () => {
  const runId = uniqueRunId('eval-legacy');
  const { eval: _added, ...older } = parseRunConfig(
    stack.config({ rollout: { tasksPerStep: 40, groupSize: 4, maxTurns: 5, concurrency: 4 } }),
  );
  await stack.store.registerRun({ runId, name: older.name, env: 'sim', config: older, incarnation: 'test', takeOver: false });
  const activities = createActivities({
    store: stack.store,
    logger: silentLogger,
    environmentFor: (c) => createEnvironment(c.env),
    trainerSessions: new TrainerSessions(silentLogger),
  });
  const env = new MockActivityEnvironment();
  const all = createEnvironment({ kind: 'sim' }).listTasks();
  for (const step of [0, 1, 2]) {
    expect(await env.run(activities.sampleTasks, { runId, purpose: 'train' as const, step })).toEqual(
      drawDistinct(all, 40, older.seed, step),
    );
  }
  const newer = parseRunConfig(stack.config({ rollout: { tasksPerStep: 40, groupSize: 4, maxTurns: 5, concurrency: 4 } }));
  const heldOut = new Set(splitTasks(all, newer.eval.heldOut).eval.map((t) => t.taskId));
  const drawn = await Promise.all([0, 1, 2].map((step) => env.run(activities.sampleTasks, { runId, purpose: 'train' as const, step })));
  expect(drawn.flat().some((t) => heldOut.has((t as { taskId: string }).taskId))).toBe(true);

  // Continuing as new (or recovering) under this code: the run's config says so from then on.
  const prepared = await env.run(activities.prepareRun, { runId, config: older, incarnation: 'test', continuing: true });
  expect((prepared as { config: RunConfig }).config.eval).toMatchObject({ enabled: false, heldOut: 0 });
  expect(((await stack.store.getRun(runId))!.config as { eval: { heldOut: number } }).eval.heldOut).toBe(0);
  expect(await env.run(activities.sampleTasks, { runId, purpose: 'train' as const, step: 1 })).toEqual(
    drawDistinct(all, 40, older.seed, 1),
  );
});
