/**
 * trainingStep: one GRPO step of a Harness-S run.
 * Base groups run one activity per task; a dead group goes to the router and
 * its rescue group starts at once, without waiting for the other groups. A
 * group whose task fails for good is left out, with its reason
 * (workflows/failures.ts); when every base group fails, the step fails as an
 * outage and the run pauses.
 */
import { ApplicationFailure, condition, getExternalWorkflowHandle, patched, proxyActivities, setCurrentDetails, setHandler } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { FAILURE_TYPES } from '../core/failure-types';
import type { GroupSummary } from '../core/rl/groups';
import { assembleTrainingGroups, failureCounts, isDeadGroup, planRescueGroup } from '../core/rl/rescue';
import { summarizeStep, type FailedGroup, type StepSummary } from '../core/rl/step-summary';
import { publishGateSignal, stepProgressSignal, type StepPhase, TASK_QUEUES, trainGateSignal, type TrainingStepInput } from './definitions';
import { controlActivityOptions, publishActivityOptions, rolloutActivityOptions, trainerActivityOptions } from './activity-options';
import { groupOrFailure } from './failures';
import { type DrawnGroup, keepGroupsWithSignal, maxDraws, wantsFreshTask } from '../core/rl/batch-fill';

/** A step tells its run how far it is at most this often (and at each change of phase). */
const PROGRESS_EVERY_MS = 5_000;

export async function trainingStep(input: TrainingStepInput): Promise<StepSummary> {
  const { runId, step, config, policyVersion, profileVersion, baseHarnessId } = input;
  let gateOpen = !input.gated;
  let publishOpen = !input.gated;
  setHandler(trainGateSignal, () => void (gateOpen = true));
  setHandler(publishGateSignal, () => void (publishOpen = true));
  const control = proxyActivities<Activities>(controlActivityOptions(config.retry));
  const publish = proxyActivities<Activities>(publishActivityOptions(config.retry));
  const rollout = proxyActivities<Activities>(rolloutActivityOptions(config.retry));
  const trainer = proxyActivities<Activities>(trainerActivityOptions(config.retry));
  const keepsFailedGroups = patched('failed-groups');
  const reportsToRun = patched('step-progress-to-run');
  // Progress to the run in phases and at most every few seconds, not once per group (the run's history stays short).
  const sendsPhases = patched('step-phases');
  const started = Date.now(); // deterministic inside a workflow
  const G = config.rollout.groupSize;
  const refill = config.sampling?.refill ?? 'none'; // absent from configs recorded before refills
  const B = config.rollout.tasksPerStep;
  // The step's task stream: its first B tasks, then (with a refill) the fresh tasks in the order they are drawn.
  const stream = await control.sampleTasks({ runId, purpose: 'train', step, ...(refill !== 'none' ? { count: maxDraws(config.sampling, B) } : {}) });
  const tasks = stream.slice(0, B);
  const failedGroups: FailedGroup[] = [];
  let groupsDone = 0;
  let drawn = tasks.length;
  let rescuesStarted = 0;
  let phase: StepPhase = 'rollouts';
  let lastSent = -Infinity;
  const progress = (newPhase?: StepPhase) => {
    const failed = failedGroups.length ? `, ${failedGroups.length} failed` : '';
    const fresh = drawn > tasks.length ? `, ${drawn - tasks.length} fresh tasks drawn` : '';
    if (newPhase === undefined) setCurrentDetails(`step ${step}: ${groupsDone}/${drawn} base groups done, ${rescuesStarted} rescues started${fresh}${failed}`);
    // The run's own page shows it too. A run that has ended meanwhile is no reason to fail the step.
    if (!reportsToRun) return;
    if (sendsPhases && newPhase === undefined && Date.now() - lastSent < PROGRESS_EVERY_MS) return;
    if (newPhase !== undefined) phase = newPhase;
    lastSent = Date.now();
    void getExternalWorkflowHandle(runId)
      .signal(stepProgressSignal, {
        step, groupsDone, groups: drawn, rescuesStarted, failedGroups: failedGroups.length, ...(sendsPhases ? { phase } : {}),
      })
      .catch(() => undefined);
  };
  progress();

  /** A group's activity; with failed groups kept, a task that fails for good is recorded and gives null. */
  const group = async (taskId: string, role: 'base' | 'rescue', run: () => Promise<GroupSummary>): Promise<GroupSummary | null> => {
    if (!keepsFailedGroups) return run();
    const outcome = await groupOrFailure(run);
    if ('group' in outcome) return outcome.group;
    failedGroups.push({ taskId, role, reason: outcome.failed });
    return null;
  };

  /** A task's base group and, when it is dead, its rescue group. */
  const playTask = async (task: (typeof stream)[number]) => {
    const base = await group(task.taskId, 'base', () =>
      rollout.runRolloutGroup({
        runId, phase: 'train', step, taskId: task.taskId, role: 'base', policyVersion,
        plan: [{ harnessId: baseHarnessId, samples: G }],
      }),
    );
    groupsDone += 1;
    progress();
    if (!base || !config.rescue.enabled || !isDeadGroup(base)) return { base, rescue: null };
    const decision = await control.chooseRescueHarnesses({
      runId, step, profileVersion,
      group: { taskId: task.taskId, kind: task.kind, failureCounts: failureCounts(base) },
    });
    if (decision.chosen.length === 0) return { base, rescue: null };
    rescuesStarted += 1;
    progress();
    const rescue = await group(task.taskId, 'rescue', () =>
      rollout.runRolloutGroup({
        runId, phase: 'train', step, taskId: task.taskId, role: 'rescue', policyVersion,
        plan: planRescueGroup(decision.chosen, G),
      }),
    );
    return { base, rescue };
  };

  /** Plays the stream's task at `index`, then, if the refill asks for it and the stream has one, the next fresh task. */
  const outcomes: DrawnGroup[] = [];
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
    throw ApplicationFailure.create({ type: FAILURE_TYPES.AllGroupsFailed, message: `every base group of step ${step} failed; the first: ${failedGroups[0]?.reason}` });
  }
  const rescueGroups = outcomes.flatMap((o) => (o.rescue ? [o.rescue] : []));
  const { kept: trainingGroups, dropped } = keepGroupsWithSignal(assembleTrainingGroups(baseGroups, rescueGroups, config.grpo.normalizeByStd), refill);
  setCurrentDetails(`step ${step}: training on ${trainingGroups.length} groups (${TASK_QUEUES.trainer})`);
  if (sendsPhases) progress('training');
  const trained = await trainer.trainStep({
    runId, step,
    groups: trainingGroups.map((g) => ({
      taskId: g.taskId,
      rollouts: g.rollouts.map((r) => ({ harnessId: r.harnessId, sample: r.sample, advantage: r.advantage })),
    })),
  });
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
  const published = await publish.publishPolicy({ runId, step, policyVersion: trained.policyVersion, samplerPath: trained.samplerPath });
  const summary = summarizeStep({
    step, policyVersionBefore: policyVersion, policyVersion: trained.policyVersion, profileVersion,
    baseGroups, rescueGroups, trainingGroups,
    datums: trained.datums, trainerMetrics: trained.metrics,
    // Both absent from histories recorded before they existed.
    logprobMismatch: trained.logprobMismatch ?? null,
    publishProbeMeanAbsDiff: published?.probeMeanAbsDiff ?? null,
    durationSeconds: (Date.now() - started) / 1000,
    phaseSeconds: {
      rollout: (rolloutsDone - started) / 1000, train: (trainDone - gateOpened) / 1000, publish: (Date.now() - publishStarted) / 1000,
      ...(input.gated ? { waitForTrainer: (gateOpened - rolloutsDone) / 1000, waitToPublish: (publishStarted - trainDone) / 1000 } : {}),
    },
    failedGroups,
    ...(input.samplerSteps !== undefined ? { staleness: step - input.samplerSteps } : {}),
    trainerTokens: trained.trainerTokens ?? 0, // absent from histories recorded before it was counted
    ...(refill !== 'none' ? { sampling: { refill, drawn, dropped } } : {}),
  });
  await control.recordStep({ runId, summary });
  setCurrentDetails(`step ${step}: done, base success ${(summary.baseSuccessRate * 100).toFixed(1)}%`);
  return summary;
}
