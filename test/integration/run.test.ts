/**
 * A small SIMULATED run, end to end on a real Temporal dev server and
 * PostgreSQL: its steps, its trajectories, its search attributes, and a replay
 * of its recorded history.
 */
import { harnessSRun } from '../../workflows';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import type { RunSummary } from '../../workflows/definitions';
import { SEARCH_ATTRIBUTES, TASK_QUEUES } from '../../workflows/definitions';
import { buildWorkflowBundle } from '../../workers/worker';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

let stack: TestStack;
let runId: string;
let summary: RunSummary;
const STEPS = 3;
const B = 4;
const G = 4;

beforeAll(async () => {
  stack = await startTestStack();
  runId = uniqueRunId('run');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: STEPS, rollout: { tasksPerStep: B, groupSize: G, maxTurns: 5, concurrency: 4 } }) }],
  });
  summary = await handle.result();
});

afterAll(async () => {
  await stack?.close();
});

test('the run completes with exactly the configured number of steps, one policy version each, named by run, trainer model and step', async () => {
  const steps = await stack.store.steps(runId);
  const modelId = (await stack.store.getRun(runId))!.trainerModelId;
  expect(steps.map((s) => s.step)).toEqual([0, 1, 2]);
  expect(steps.map((s) => s.policyVersion)).toEqual([0, 1, 2].map((n) => `${runId}-${modelId}-step-${n}`));
  expect(summary.stepsCompleted).toBe(STEPS);
  expect(summary.policyVersion).toBe(`${runId}-${modelId}-step-2`);
  expect(summary.simulated).toBe(true);
});

test('each step records its mean reward, the trainer/sampler log-prob mismatch (none for the sim) and the publish probe', async () => {
  const steps = (await stack.store.steps(runId)).map((r) => r.summary);
  expect(steps.some((s) => s.datums > 0)).toBe(true);
  for (const s of steps) {
    expect(s.baseMeanReward).toBeGreaterThanOrEqual(0);
    expect(s.publishProbeMeanAbsDiff).toBeLessThan(1e-6); // float32 on the wire
    if (s.datums > 0) expect(s.logprobMismatch).toMatchObject({ meanAbsDiff: expect.any(Number), ratioMean: expect.any(Number) });
    if (s.logprobMismatch) expect(s.logprobMismatch.meanAbsDiff).toBeLessThan(1e-6);
  }
  expect(summary.rewardStart).toEqual(expect.any(Number));
  expect(summary.rewardEnd).toEqual(expect.any(Number));
});

test('each step stores B x G base trajectories plus G for every rescued dead group, and nothing else', async () => {
  const steps = (await stack.store.steps(runId)).map((s) => s.summary);
  const rescueGroups = steps.reduce((n, s) => n + s.rescueRollouts / G, 0);
  const expected = STEPS * B * G + rescueGroups * G;
  expect(await stack.store.countTrajectories(runId)).toBe(expected);
  expect(steps.some((s) => s.deadGroups > 0)).toBe(true);
  for (const s of steps) {
    expect(s.baseRollouts).toBe(B * G);
    // Every dead group went to the router and got a rescue group of size G.
    expect(s.rescueRollouts).toBe(s.deadGroups * G);
  }
});

test('rescue trajectories keep their sibling harness and the rescued group keeps size G', async () => {
  const { rows } = await stack.store.queryForTests(
    `SELECT step, task_id, array_agg(DISTINCT harness_id) AS harnesses, count(*)::int AS n
     FROM trajectories WHERE run_id = $1 AND phase = 'train' AND role = 'rescue' GROUP BY step, task_id`,
    [runId],
  );
  expect(rows.length).toBeGreaterThan(0); // some group died and was rescued in this run
  for (const row of rows) {
    expect(row.n).toBe(G);
    expect(row.harnesses).not.toContain('base');
    expect(row.harnesses.length).toBe(2);
  }
});

test('the trainer received a step for every training step and the policy was published', async () => {
  for (let step = 0; step < STEPS; step++) {
    const record = await stack.store.trainerStep(runId, step);
    expect(record?.samplerPath).toMatch(/^tinker:\/\//);
  }
  const models = (await (await fetch(`${stack.sim.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
  expect(models.data.map((m) => m.id)).toContain(summary.policyVersion);
  // One optimizer step per training step: seq_ids made every trainer op exactly-once.
  const info = (await (
    await fetch(`${stack.sim.url}/api/v1/get_info`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model_id: (await stack.store.getRun(runId))!.trainerModelId }),
    })
  ).json()) as { optim_steps: number };
  expect(info.optim_steps).toBe(STEPS);
});

test('the run shows in the workflow list with its search attributes', async () => {
  const description = await stack.client.workflow.getHandle(runId).describe();
  expect(description.typedSearchAttributes.get(SEARCH_ATTRIBUTES.runName)).toBe('test-run');
  expect(description.typedSearchAttributes.get(SEARCH_ATTRIBUTES.env)).toBe('sim');
  expect(description.typedSearchAttributes.get(SEARCH_ATTRIBUTES.step)).toBe(STEPS);
  expect(typeof description.typedSearchAttributes.get(SEARCH_ATTRIBUTES.baseSuccess)).toBe('number');
});

test('the run continued as new when Temporal suggested it, and still finished every step', async () => {
  // The test server suggests continue-as-new after 25 events.
  const description = await stack.client.workflow.getHandle(runId).describe();
  expect(description.runId).not.toBe(description.raw.workflowExecutionInfo?.firstRunId);
});

test('recorded workflow histories replay without a determinism error', async () => {
  const workflowBundle = await buildWorkflowBundle();
  const ids = [runId, `${runId}/step-0`, `${runId}/profiles-v1`];
  for (const workflowId of ids) {
    const history = await stack.client.workflow.getHandle(workflowId).fetchHistory();
    await expect(Worker.runReplayHistory({ workflowBundle }, history, workflowId)).resolves.toBeUndefined();
  }
});

test('a run recorded before evaluatePolicy existed replays under this code without a determinism error', async () => {
  // Recorded with the code of commit ce9f6c9 (11 steps, re-anchoring at 5 and 10, no evaluation after
  // step 10), fetched with the client's fetchHistory() and saved with History.encode.
  const recorded = temporal.api.history.v1.History.decode(
    readFileSync(path.join(__dirname, 'fixtures', 'harnessSRun-before-evaluatePolicy.pb')),
  );
  expect(recorded.events).toHaveLength(155);
  const workflowBundle = await buildWorkflowBundle();
  await expect(Worker.runReplayHistory({ workflowBundle }, recorded, 'replay-fixture-pre-eval')).resolves.toBeUndefined();
});
