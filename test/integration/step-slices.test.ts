/**
 * A step split over child workflows, end to end on a real Temporal dev server,
 * PostgreSQL and the SIMULATED cluster: as small as a split step can be made
 * (3 tasks x G=2 in slices of 4 rollouts: 2 tasks, then 1). Every rollout
 * planned is stored once, the trainer reads the whole batch from the run
 * store, and the histories of the step and its slices replay.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { countResponseTokens } from '../../core/rl/datums';
import type { StepRecord } from '../../core/store/run-store';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import { buildWorkflowBundle } from '../../workers/worker';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const B = 3;
const G = 2;
let stack: TestStack;
let runId: string;
let step: StepRecord['summary'];

beforeAll(async () => {
  stack = await startTestStack();
  runId = uniqueRunId('split');
  await stack.client.workflow.execute(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: stack.config({
          steps: 1,
          rollout: { tasksPerStep: B, groupSize: G, maxTurns: 5, concurrency: 4, rolloutsPerSlice: 4 },
          eval: { enabled: false },
        }),
      },
    ],
  });
  [{ summary: step }] = await stack.store.steps(runId);
});

afterAll(async () => {
  await stack?.close();
});

const stepId = () => `${runId}/step-0`;

test('the step ran its tasks in two slices, each a child workflow that completed', async () => {
  const status = async (id: string) => (await stack.client.workflow.getHandle(id).describe()).status.name;
  expect(await status(`${stepId()}/slice-0`)).toBe('COMPLETED');
  expect(await status(`${stepId()}/slice-1`)).toBe('COMPLETED');
  await expect(stack.client.workflow.getHandle(`${stepId()}/slice-2`).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  expect(step).toMatchObject({ tasks: B, baseRollouts: B * G, failedGroups: [] });
});

test('the trajectories stored are the rollouts planned: B x G base rollouts and G for each dead group the router sent to siblings, each once', async () => {
  const rescues = (await stack.store.routingDecisions(runId)).filter((d) => d.step === 0 && d.chosen.length > 0).length;
  const planned = B * G + rescues * G;
  expect(step.rescueRollouts).toBe(rescues * G);
  expect(await stack.store.countTrajectories(runId)).toBe(planned);
  const { rows } = await stack.store.queryForTests(
    `SELECT count(DISTINCT (task_id, harness_id, sample))::int AS n FROM trajectories WHERE run_id = $1 AND phase = 'train' AND step = 0 AND superseded_by IS NULL`,
    [runId],
  );
  expect(rows[0].n).toBe(planned);
});

test('the trainer got every rollout of the batch from the run store: B groups of G, each a stored trajectory', async () => {
  // One more than the step wrote: a group past the batch would show.
  const batch = await stack.store.trainingBatches.groups(runId, stepId(), B + 1);
  expect(batch).toHaveLength(B);
  expect(batch.every((g) => g.rollouts.length === G)).toBe(true);
  // A dead group with a rescue group trains on its siblings' rollouts in its place.
  expect(batch.filter((g) => g.role === 'rescue')).toHaveLength(step.rescueRollouts / G);

  const samples = await stack.store.tokenSamples(
    runId,
    'train',
    0,
    batch.map((g) => g.taskId),
  );
  const trajectories = batch.flatMap((g) => g.rollouts.map((r) => samples.get(`${g.taskId}/${r.harnessId}/${r.sample}`)));
  expect(trajectories.every((t) => t !== undefined)).toBe(true);
  // The trainer counts the response tokens of every rollout it was given, trained or not (zero advantage).
  const trained = await stack.store.trainerStep(runId, 0);
  expect(trained?.responseTokens).toBe(countResponseTokens(trajectories.flatMap((t) => t!)));
  expect(trained?.responseTokens).toBeGreaterThan(0);
});

test('the histories of the split step and its slices replay on the current workflow code', async () => {
  const bundle = await buildWorkflowBundle();
  for (const id of [stepId(), `${stepId()}/slice-0`, `${stepId()}/slice-1`]) {
    const history = await stack.client.workflow.getHandle(id).fetchHistory();
    await expect(Worker.runReplayHistory({ workflowBundle: bundle }, history, id)).resolves.toBeUndefined();
  }
});
