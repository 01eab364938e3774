/**
 * trainingStep: one GRPO step of a Harness-S run.
 * Base groups run one activity per task; a dead group goes to the router and
 * its rescue group starts at once, without waiting for the other groups. A
 * group whose task fails for good is left out, with its reason
 * (workflows/failures.ts); when every base group fails, the step fails as an
 * outage and the run pauses.
 *
 * A step with more base rollouts than `rollout.rolloutsPerSlice` plays its
 * tasks in slices, each a child workflow (step-slice.ts), so no history nears
 * Temporal's 10k-event warning (core/rl/step-slices.ts). The trainer takes the
 * batch by reference: the step writes it to the run store in chunks, and
 * trainStep's input names it (core/rl/training-batch.ts).
 */
import {
  ApplicationFailure,
  condition,
  executeChild,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { TaskRef } from '../core/harness/task';
import { FAILURE_TYPES } from '../core/failure-types';
import { assembleTrainingGroups } from '../core/rl/rescue';
import { summarizeStep, type FailedGroup, type StepSummary } from '../core/rl/step-summary';
import { BATCH_CHUNK_ROLLOUTS, batchChunks, sliceRanges, tasksPerSlice } from '../core/rl/step-slices';
import { batchGroupsOf, batchRefOf } from '../core/rl/training-batch';
import {
  publishGateSignal,
  type SliceProgress,
  sliceProgressSignal,
  stepProgressSignal,
  type StepPhase,
  TASK_QUEUES,
  trainGateSignal,
  type TrainingStepInput,
} from './definitions';
import { controlActivityOptions, trainerActivityOptions } from './activity-options';
import { publishPolicyVersion, type ReplicaPublishOutcome } from './publish';
import type { WorkerReplicaViews } from '../core/policy/replicas';
import { type DrawnGroup, keepGroupsWithSignal, maxDraws, wantsFreshTask } from '../core/rl/batch-fill';
import { taskPlayer } from './step-groups';
import { trainingStepSlice } from './step-slice';
import { upgradeStepInput, upgradeTrained } from './upgrade';

/** A step tells its run how far it is at most this often (and at each change of phase). */
const PROGRESS_EVERY_MS = 5_000;

export async function trainingStep(recorded: TrainingStepInput): Promise<StepSummary> {
  const input = upgradeStepInput(recorded);
  const { runId, step, config, policyVersion, profileVersion, baseHarnessId } = input;
  let gateOpen = !input.gated;
  let publishOpen = !input.gated;
  setHandler(trainGateSignal, () => void (gateOpen = true));
  setHandler(publishGateSignal, () => void (publishOpen = true));
  const control = proxyActivities<Activities>(controlActivityOptions(config.retry));
  const trainer = proxyActivities<Activities>(trainerActivityOptions(config.retry));
  const keepsFailedGroups = patched('failed-groups');
  const reportsToRun = patched('step-progress-to-run');
  // Progress to the run in phases and at most every few seconds, not once per group (the run's history stays short).
  const sendsPhases = patched('step-phases');
  const started = Date.now(); // deterministic inside a workflow
  const G = config.rollout.groupSize;
  const refill = config.sampling.refill;
  const B = config.rollout.tasksPerStep;
  // The step's task stream: its first B tasks, then (with a refill) the fresh tasks in the order they are drawn.
  const stream = await control.sampleTasks({
    runId,
    purpose: 'train',
    step,
    ...(refill !== 'none' ? { count: maxDraws(config.sampling, B) } : {}),
  });
  const tasks = stream.slice(0, B);
  const failedGroups: FailedGroup[] = [];
  /** Base groups done, rescues started and groups failed so far: counted here, or summed over the slices' reports. */
  const counts = { groupsDone: 0, rescuesStarted: 0, failedGroups: 0 };
  let drawn = tasks.length;
  let phase: StepPhase = 'rollouts';
  let lastSent = -Infinity;
  /** Each rollout worker's latest view of the replicas, sent with the next progress once one came in. */
  const replicaViews = new Map<string, WorkerReplicaViews>();
  let viewsChanged = false;
  let published: ReplicaPublishOutcome[] | undefined;
  const progress = (newPhase?: StepPhase) => {
    const { groupsDone, rescuesStarted } = counts;
    const failed = counts.failedGroups ? `, ${counts.failedGroups} failed` : '';
    const fresh = drawn > tasks.length ? `, ${drawn - tasks.length} fresh tasks drawn` : '';
    if (newPhase === undefined)
      setCurrentDetails(`step ${step}: ${groupsDone}/${drawn} base groups done, ${rescuesStarted} rescues started${fresh}${failed}`);
    // The run's own page shows it too. A run that has ended meanwhile is no reason to fail the step.
    if (!reportsToRun) return;
    if (sendsPhases && newPhase === undefined && Date.now() - lastSent < PROGRESS_EVERY_MS) return;
    if (newPhase !== undefined) phase = newPhase;
    lastSent = Date.now();
    const replicas = {
      ...(viewsChanged ? { replicaViews: [...replicaViews.values()] } : {}),
      ...(published ? { published } : {}),
    };
    viewsChanged = false;
    published = undefined;
    void getExternalWorkflowHandle(runId)
      .signal(stepProgressSignal, {
        step,
        groupsDone,
        groups: drawn,
        rescuesStarted,
        failedGroups: counts.failedGroups,
        ...(sendsPhases ? { phase } : {}),
        ...replicas,
      })
      .catch(() => undefined);
  };
  progress();

  const outcomes: DrawnGroup[] = [];
  const perSlice = tasksPerSlice(config.rollout.rolloutsPerSlice, G);
  // A refill draws the stream's tasks in order across the whole step: such a step is never split (its size is capped instead).
  if (refill === 'none' && B > perSlice && patched('step-slices')) {
    const played = await playInSlices(input, tasks, perSlice, (reported) => {
      Object.assign(counts, reported);
      progress();
    });
    outcomes.push(...played.groups);
    failedGroups.push(...played.failedGroups);
  } else {
    const playTask = taskPlayer({
      runId,
      step,
      config,
      policyVersion,
      profileVersion,
      baseHarnessId,
      keepsFailedGroups,
      onFailed: (failed) => {
        failedGroups.push(failed);
        counts.failedGroups = failedGroups.length;
      },
      onBaseDone: () => {
        counts.groupsDone += 1;
        progress();
      },
      onRescueStarted: () => {
        counts.rescuesStarted += 1;
        progress();
      },
      onReplicaViews: (views) => {
        replicaViews.set(views.worker, views);
        viewsChanged = true;
      },
    });
    /** Plays the stream's task at `index`, then, if the refill asks for it and the stream has one, the next fresh task. */
    const play = async (index: number): Promise<void> => {
      const outcome = { index, ...(await playTask(stream[index])) };
      outcomes.push(outcome);
      if (wantsFreshTask(outcome, refill, B) && drawn < stream.length) {
        const next = drawn++;
        progress();
        await play(next);
      }
    };
    await Promise.all(tasks.map((_, index) => play(index)));
  }
  outcomes.sort((a, b) => a.index - b.index); // in stream order, whatever order they ended in
  const rolloutsDone = Date.now();
  if (input.gated) {
    setCurrentDetails(`step ${step}: rollouts done, waiting for the previous step's training`);
    progress('waiting-for-trainer');
    await condition(() => gateOpen);
  }
  const gateOpened = Date.now();

  const baseGroups = outcomes.flatMap((o) => (o.base ? [o.base] : []));
  if (baseGroups.length === 0) {
    // Not one task could run: the environment, not a task, is failing. The run pauses on it.
    throw ApplicationFailure.create({
      type: FAILURE_TYPES.AllGroupsFailed,
      message: `every base group of step ${step} failed; the first: ${failedGroups[0]?.reason}`,
    });
  }
  const rescueGroups = outcomes.flatMap((o) => (o.rescue ? [o.rescue] : []));
  const { kept: trainingGroups, dropped } = keepGroupsWithSignal(
    assembleTrainingGroups(baseGroups, rescueGroups, config.grpo.normalizeByStd),
    refill,
  );
  setCurrentDetails(`step ${step}: training on ${trainingGroups.length} groups (${TASK_QUEUES.trainer})`);
  if (sendsPhases) progress('training');
  const batch = batchGroupsOf(trainingGroups);
  // The batch goes to the run store in chunks, keyed by this step workflow's id, and trainStep reads it there
  // (before: listed in trainStep's input, which Temporal's 2 MB payload limit stopped near 28k rollouts).
  const byReference = patched('train-batch-by-reference');
  const batchKey = workflowInfo().workflowId;
  if (byReference) {
    await Promise.all(
      batchChunks(batch, BATCH_CHUNK_ROLLOUTS).map((chunk) =>
        control.storeTrainingBatch({ runId, step, batchKey, first: chunk.first, groups: chunk.groups }),
      ),
    );
  }
  const trained = upgradeTrained(
    await trainer.trainStep(
      byReference
        ? { runId, step, batch: batchRefOf(batchKey, batch) }
        : { runId, step, groups: batch.map((g) => ({ taskId: g.taskId, rollouts: g.rollouts })) },
    ),
  );
  const trainDone = Date.now();
  if (input.gated) {
    // An inference server then never samples two policy versions at once (the probe of the new one beside the
    // rollouts of the old; vLLM's CPU build crashes on a batch that mixes LoRA adapters).
    setCurrentDetails(`step ${step}: trained, waiting for the next step's rollouts to end before publishing`);
    progress('waiting-to-publish');
    await condition(() => publishOpen);
  }
  const publishStarted = Date.now();
  setCurrentDetails(`step ${step}: publishing ${trained.policyVersion}`);
  if (sendsPhases) progress('publishing');
  const publishOutcome = await publishPolicyVersion(
    { runId, step, policyVersion: trained.policyVersion, samplerPath: trained.samplerPath },
    config.retry,
  );
  if (publishOutcome.replicas.length > 0 && sendsPhases && reportsToRun && patched('replica-status')) {
    // The run's status shows the version each replica now serves.
    published = publishOutcome.replicas;
    progress('publishing');
  }
  const summary = summarizeStep({
    step,
    policyVersionBefore: policyVersion,
    policyVersion: trained.policyVersion,
    profileVersion,
    baseGroups,
    rescueGroups,
    trainingGroups,
    datums: trained.datums,
    trainerMetrics: trained.metrics,
    logprobMismatch: trained.logprobMismatch,
    publishProbeMeanAbsDiff: publishOutcome.probeMeanAbsDiff,
    durationSeconds: (Date.now() - started) / 1000,
    phaseSeconds: {
      rollout: (rolloutsDone - started) / 1000,
      train: (trainDone - gateOpened) / 1000,
      publish: (Date.now() - publishStarted) / 1000,
      ...(input.gated ? { waitForTrainer: (gateOpened - rolloutsDone) / 1000, waitToPublish: (publishStarted - trainDone) / 1000 } : {}),
    },
    failedGroups,
    ...(input.samplerSteps !== undefined ? { staleness: step - input.samplerSteps } : {}),
    trainerTokens: trained.trainerTokens,
    ...(refill !== 'none' ? { sampling: { refill, drawn, dropped } } : {}),
  });
  await control.recordStep({ runId, summary });
  setCurrentDetails(`step ${step}: done, base success ${(summary.baseSuccessRate * 100).toFixed(1)}%`);
  return summary;
}

/**
 * The step's first tasks played in slices, each a child workflow `<step>/slice-<i>` (step-slice.ts), all at
 * once; their groups in stream order. `onProgress` gets the groups done, rescues started and groups failed
 * over every slice as the slices report them.
 */
async function playInSlices(
  input: TrainingStepInput,
  tasks: readonly TaskRef[],
  perSlice: number,
  onProgress: (counts: { groupsDone: number; rescuesStarted: number; failedGroups: number }) => void,
): Promise<{ groups: DrawnGroup[]; failedGroups: FailedGroup[] }> {
  const { runId, step, config, policyVersion, profileVersion, baseHarnessId } = input;
  const stepWorkflowId = workflowInfo().workflowId;
  const reported = new Map<number, SliceProgress>();
  const report = (progress: SliceProgress) => {
    // A slice's signals come in order, and its result last: a count never goes back.
    if ((reported.get(progress.slice)?.groupsDone ?? -1) >= progress.groupsDone) return;
    reported.set(progress.slice, progress);
    const sum = (pick: (p: SliceProgress) => number) => [...reported.values()].reduce((n, p) => n + pick(p), 0);
    onProgress({
      groupsDone: sum((p) => p.groupsDone),
      rescuesStarted: sum((p) => p.rescuesStarted),
      failedGroups: sum((p) => p.failedGroups),
    });
  };
  setHandler(sliceProgressSignal, report);
  const results = await Promise.all(
    sliceRanges(tasks.length, perSlice).map(async ({ slice, first, count }) => {
      const result = await executeChild(trainingStepSlice, {
        workflowId: `${stepWorkflowId}/slice-${slice}`,
        taskQueue: TASK_QUEUES.control,
        staticSummary: `step ${step}, tasks ${first}-${first + count - 1} (slice ${slice})`,
        args: [
          { runId, step, config, policyVersion, profileVersion, baseHarnessId, slice, first, tasks: tasks.slice(first, first + count) },
        ],
      });
      report({ slice, groupsDone: count, rescuesStarted: result.rescuesStarted, failedGroups: result.failedGroups.length });
      return result;
    }),
  );
  return { groups: results.flatMap((r) => r.groups), failedGroups: results.flatMap((r) => r.failedGroups) };
}
