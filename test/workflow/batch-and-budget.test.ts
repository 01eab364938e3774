/**
 * How a step fills its batch (sampling.refill), what it spends, a run that
 * stops at its budget, and a run that says it stopped learning. The fakes'
 * first task of every step (`-t0`) is hard: every base rollout fails; every
 * other group, and any sibling's, succeeds on its even samples.
 */
import { harnessSRun } from '../../workflows';
import { resumeSignal, statusQuery, TASK_QUEUES, updateConfigUpdate } from '../../workflows/definitions';
import type { RunConfigInput } from '../../core/config';
import { smallRunConfig, startWorkflowTestEnv, waitFor, type WorkflowTestEnv } from './workflow-env';

let env: WorkflowTestEnv;
beforeAll(async () => {
  env = await startWorkflowTestEnv();
});
afterAll(async () => {
  await env?.close();
});

const run = async (runId: string, config: RunConfigInput) =>
  env.client.workflow.execute(harnessSRun, { workflowId: runId, taskQueue: TASK_QUEUES.control, args: [{ config }] });
const trainedTasks = (runId: string, step: number) => env.fakes.trainedGroups(runId, step).map((g) => g.taskId);
const baseGroupsRun = (runId: string, step: number) =>
  env.fakes
    .inputsOf('runRolloutGroup', runId)
    .filter((input) => input.step === step && input.role === 'base' && input.phase === 'train')
    .map((input) => input.taskId);

describe('refills', () => {
  test("dynamic sampling drops the dead group, draws the stream's next task in its place, and records both", async () => {
    const runId = 'refill-dynamic';
    const summary = await run(runId, smallRunConfig({ steps: 1, rescue: { enabled: false }, sampling: { refill: 'dynamic' } }));
    expect(baseGroupsRun(runId, 0).sort()).toEqual(['sql-s0-t0', 'api-s0-t1', 'sql-s0-t2'].sort());
    expect(trainedTasks(runId, 0)).toEqual(['api-s0-t1', 'sql-s0-t2']);
    // The stream the step drew from: its first 2 tasks, then up to 3 x 2 in all.
    expect(env.fakes.inputsOf('sampleTasks', runId).find((i) => i.purpose === 'train')).toMatchObject({ step: 0, count: 6 });
    const status = await env.client.workflow.getHandle(runId).query(statusQuery);
    expect(status.lastStep).toMatchObject({
      tasks: 3,
      deadGroups: 1,
      liveGroupFraction: 1,
      liveDrawnFraction: 2 / 3,
      sampling: { refill: 'dynamic', drawn: 3, dropped: [{ taskId: 'sql-s0-t0', role: 'base', reward: 0 }] },
      spend: { rollouts: 12, promptTokens: 12 * 20, completionTokens: 12 * 5 },
    });
    expect(summary.spend).toMatchObject({ rollouts: 12, policyTokens: 12 * 25 });
  });

  test('dynamic sampling stops at maxDraws: the step trains on the groups with signal it found', async () => {
    const runId = 'refill-capped';
    // Tasks 0..2 of the fakes' stream: t0 is hard, so with maxDraws 2 the dead group is dropped and nothing refills it.
    await run(runId, smallRunConfig({ steps: 1, rescue: { enabled: false }, sampling: { refill: 'dynamic', maxDraws: 2 } }));
    expect(baseGroupsRun(runId, 0).sort()).toEqual(['api-s0-t1', 'sql-s0-t0']);
    expect(trainedTasks(runId, 0)).toEqual(['api-s0-t1']);
  });

  test('matched: a dead group draws one fresh task and keeps both, so the step costs what a rescued step costs', async () => {
    const runId = 'refill-matched';
    await run(runId, smallRunConfig({ steps: 1, rescue: { enabled: false }, sampling: { refill: 'matched' } }));
    expect(trainedTasks(runId, 0)).toEqual(['sql-s0-t0', 'api-s0-t1', 'sql-s0-t2']);
    const status = await env.client.workflow.getHandle(runId).query(statusQuery);
    expect(status.lastStep).toMatchObject({ sampling: { refill: 'matched', drawn: 3, dropped: [] }, spend: { rollouts: 12 } });

    const rescued = 'refill-none-rescue';
    await run(rescued, smallRunConfig({ steps: 1 }));
    const rescuedStatus = await env.client.workflow.getHandle(rescued).query(statusQuery);
    expect(rescuedStatus.lastStep?.spend?.rollouts).toBe(12);
    expect(rescuedStatus.lastStep?.sampling).toBeUndefined();
  });

  test('rescue then dynamic sampling: a group the siblings revived is kept, nothing is drawn', async () => {
    const runId = 'refill-after-rescue';
    await run(runId, smallRunConfig({ steps: 1, sampling: { refill: 'dynamic' } }));
    expect(baseGroupsRun(runId, 0)).toHaveLength(2);
    expect(trainedTasks(runId, 0)).toEqual(['sql-s0-t0', 'api-s0-t1']);
    const status = await env.client.workflow.getHandle(runId).query(statusQuery);
    expect(status.lastStep).toMatchObject({ rescuedGroups: 1, sampling: { drawn: 2, dropped: [] }, spend: { rollouts: 12 } });
  });
});

describe('budget', () => {
  test('a run stops training at the first step whose spend reaches its budget, evaluates there, and shows its spend', async () => {
    const runId = 'budget-rollouts';
    // 12 rollouts a step (2 tasks x 4, and 4 rescue rollouts for the hard one): the budget is reached during step 2.
    const summary = await run(
      runId,
      smallRunConfig({ steps: 10, budget: { rollouts: 30 }, eval: { enabled: true, every: 2, heldOut: 0.2 } }),
    );
    expect(summary.stepsCompleted).toBe(3);
    expect(summary.spend?.rollouts).toBe(36);
    expect(env.fakes.inputsOf('trainStep', runId).map((i) => i.step)).toEqual([0, 1, 2]);
    // The evaluation after step 2 is not run twice: the final one is after the 3 steps trained.
    expect(summary.evaluations.map((e) => e.afterSteps)).toEqual([2, 3]);
    const status = await env.client.workflow.getHandle(runId).query(statusQuery);
    expect(status).toMatchObject({ phase: 'done', step: 3, steps: 10, budget: { rollouts: 30 }, spent: { rollouts: 36, tokens: 36 * 25 } });
  });

  test('a budget given while the run goes on (run update) stops it once spent', async () => {
    const runId = 'budget-by-update';
    const step0 = env.fakes.hold('trainStep', (input) => input.runId === runId && input.step === 0);
    const handle = await env.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 10 }) }],
    });
    await step0.reached;
    const update = await handle.executeUpdate(updateConfigUpdate, { args: [{ budget: { rollouts: 24 } }] });
    expect(update.config.budget).toEqual({ rollouts: 24 });
    step0.release();
    // 12 rollouts a step: the budget is spent after step 1.
    expect((await handle.result()).stepsCompleted).toBe(2);
    expect(await handle.query(statusQuery)).toMatchObject({ budget: { rollouts: 24 }, spent: { rollouts: 24 } });
  });
});

describe('health', () => {
  test('a run whose groups carry too little signal is marked stalled and, with pause, pauses with the reason until resumed', async () => {
    const runId = 'health-stalled';
    const handle = await env.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      // Half of each step's groups are live (the hard one is not rescued): below 90% for 2 steps trips the rule.
      args: [
        {
          config: smallRunConfig({
            steps: 4,
            rescue: { enabled: false },
            health: { minLiveShare: 0.9, steps: 2, evaluations: 0, pause: true },
          }),
        },
      ],
    });
    const paused = await waitFor('the run to pause itself', async () => {
      const status = await handle.query(statusQuery);
      return status.paused && status;
    });
    expect(paused.step).toBe(2);
    expect(paused.health).toEqual({
      state: 'stalled',
      sinceStep: 1,
      reasons: ['fewer than 90.0% of groups had a learning signal in each of the last 2 steps (50.0%, 50.0%)'],
    });
    expect(paused.pauseReason).toMatch(/^stalled after step 1: fewer than 90.0% of groups had a learning signal/);
    // The Web UI shows it in the run's current details.
    const details = (await handle.query<{ currentDetails: string }>('__temporal_workflow_metadata')).currentDetails;
    expect(details.split('\n')[1]).toBe(
      'STALLED since step 1: fewer than 90.0% of groups had a learning signal in each of the last 2 steps (50.0%, 50.0%)',
    );

    // A resume starts the window over: the rule trips again after 2 more steps, at the run's end, without pausing it.
    await handle.signal(resumeSignal);
    const summary = await handle.result();
    expect(summary.stepsCompleted).toBe(4);
    expect(await handle.query(statusQuery)).toMatchObject({ paused: false, health: { state: 'stalled', sinceStep: 3 } });
  });

  test('a run that learns stays marked as learning', async () => {
    const runId = 'health-learning';
    const handle = await env.client.workflow.start(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: smallRunConfig({ steps: 3, health: { minLiveShare: 0.9, steps: 2, pause: true } }) }],
    });
    await handle.result();
    expect(await handle.query(statusQuery)).toMatchObject({ paused: false, health: { state: 'learning', reasons: [], sinceStep: null } });
  });
});
