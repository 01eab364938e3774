/** Policy-aware re-anchoring: the profiles are re-measured with the current policy every M steps. */
import { harnessSRun } from '../../workflows';
import { routeByValidation } from '../../core/router/validation';
import { statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(async () => {
  await stack?.close();
});

test('profiles are re-measured every M steps with the then-current policy, probing recent dead groups, and later steps route with the new version', async () => {
  const runId = uniqueRunId('reanchor');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: 4, router: { probeTasksPerKind: 1, probeRollouts: 2, reanchorEvery: 2 } }) }],
  });
  await handle.result();
  const { rows: versions } = await stack.store.queryForTests(
    'SELECT version, policy_version FROM profiles WHERE run_id = $1 ORDER BY version',
    [runId],
  );
  // v1 at the start with the base policy; v2 after step 1 with that step's policy; none after the last step.
  expect(versions.map((v) => v.version)).toEqual([1, 2]);
  expect(versions[0].policy_version).toBe('sim-policy-base');
  expect(versions[1].policy_version).toBe((await stack.store.trainerStep(runId, 1))!.policyVersion);

  const steps = (await stack.store.steps(runId)).map((s) => s.summary);
  expect(steps.map((s) => s.profileVersion)).toEqual([1, 1, 2, 2]);

  const dead = new Set(steps.slice(0, 2).flatMap((s) => s.deadTaskIds));
  const { rows: probed } = await stack.store.queryForTests(
    `SELECT DISTINCT task_id FROM trajectories WHERE run_id = $1 AND phase = 'probe-v2'`,
    [runId],
  );
  const probedIds = new Set(probed.map((r) => r.task_id));
  for (const taskId of dead) expect(probedIds.has(taskId)).toBe(true);

  const status = await handle.query(statusQuery);
  expect(status.profileVersion).toBe(2);
  expect(typeof status.profileShift).toBe('number');
});

test('after re-anchoring the router follows the new profile version, and picks siblings the old version would not have', async () => {
  const runId = uniqueRunId('reanchor-routing');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: stack.config({
          steps: 4,
          seed: 11,
          eval: { enabled: false },
          router: { probeTasksPerKind: 1, probeRollouts: 2, reanchorEvery: 2 },
        }),
      },
    ],
  });
  await handle.result();
  const [v1, v2] = [await stack.store.profiles(runId, 1), await stack.store.profiles(runId, 2)];
  const siblings = ['ar-format', 'ec-docs-injected', 'ec-schema', 'ps-recipe', 'tr-budget'];
  const decisions = await stack.store.routingDecisions(runId);
  const later = decisions.filter((d) => d.step >= 2);
  expect(later.length).toBeGreaterThan(0);
  let changed = 0;
  for (const d of decisions) {
    const group = { taskId: d.taskId, kind: d.kind, failureCounts: d.failureCounts };
    const inForce = d.step < 2 ? v1! : v2!;
    expect(d.profileVersion).toBe(inForce.version);
    expect(d.chosen).toEqual(routeByValidation(inForce, siblings, group, 2).chosen);
    if (d.step >= 2 && routeByValidation(v1!, siblings, group, 2).chosen.join() !== d.chosen.join()) changed += 1;
  }
  expect(changed).toBeGreaterThan(0);
});
