/**
 * trainingStep: one GRPO step of a Harness-S run.
 * Base groups run one activity per task; a dead group goes to the router and
 * its rescue group starts at once, without waiting for the other groups.
 */
import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { GroupSummary } from '../core/rl/groups';
import { assembleTrainingGroups, failureCounts, groupIsDead, planRescueGroup } from '../core/rl/rescue';
import { summarizeStep, type StepSummary } from '../core/rl/step-summary';
import { TASK_QUEUES, type TrainingStepInput } from './definitions';
import { controlActivityOptions, publishActivityOptions, rolloutActivityOptions, trainerActivityOptions } from './activity-options';

const control = proxyActivities<Activities>(controlActivityOptions);
const publish = proxyActivities<Activities>(publishActivityOptions);
const rollout = proxyActivities<Activities>(rolloutActivityOptions);
const trainer = proxyActivities<Activities>(trainerActivityOptions);

export async function trainingStep(input: TrainingStepInput): Promise<StepSummary> {
  const { runId, step, config, policyVersion, profileVersion, baseHarnessId } = input;
  const started = Date.now(); // deterministic inside a workflow
  const G = config.rollout.groupSize;
  const tasks = await control.sampleTasks({ runId, purpose: 'train', step });
  let groupsDone = 0;
  let rescuesStarted = 0;
  const progress = () =>
    setCurrentDetails(`step ${step}: ${groupsDone}/${tasks.length} base groups done, ${rescuesStarted} rescues started`);
  progress();

  const outcomes = await Promise.all(
    tasks.map(async (task) => {
      const base = await rollout.runRolloutGroup({
        runId, phase: 'train', step, taskId: task.taskId, role: 'base', policyVersion,
        plan: [{ harnessId: baseHarnessId, samples: G }],
      });
      groupsDone += 1;
      progress();
      if (!config.rescue.enabled || !groupIsDead(base)) return { base, rescue: null };
      const decision = await control.chooseRescueHarnesses({
        runId, step, profileVersion,
        group: { taskId: task.taskId, kind: task.kind, failureCounts: failureCounts(base) },
      });
      if (decision.chosen.length === 0) return { base, rescue: null };
      rescuesStarted += 1;
      progress();
      const rescue = await rollout.runRolloutGroup({
        runId, phase: 'train', step, taskId: task.taskId, role: 'rescue', policyVersion,
        plan: planRescueGroup(decision.chosen, G),
      });
      return { base, rescue };
    }),
  );

  const baseGroups = outcomes.map((o) => o.base);
  const rescueGroups = outcomes.flatMap((o) => (o.rescue ? [o.rescue] : [])) as GroupSummary[];
  const trainingGroups = assembleTrainingGroups(baseGroups, rescueGroups, config.grpo.normalizeByStd);
  setCurrentDetails(`step ${step}: training on ${trainingGroups.length} groups (${TASK_QUEUES.trainer})`);
  const trained = await trainer.trainStep({
    runId, step,
    groups: trainingGroups.map((g) => ({
      taskId: g.taskId,
      rollouts: g.rollouts.map((r) => ({ harnessId: r.harnessId, sample: r.sample, advantage: r.advantage })),
    })),
  });
  setCurrentDetails(`step ${step}: publishing ${trained.policyVersion}`);
  const published = await publish.publishPolicy({ runId, step, policyVersion: trained.policyVersion, samplerPath: trained.samplerPath });
  const summary = summarizeStep({
    step, policyVersionBefore: policyVersion, policyVersion: trained.policyVersion, profileVersion,
    baseGroups, rescueGroups, trainingGroups,
    datums: trained.datums, trainerMetrics: trained.metrics,
    // Both absent from histories recorded before they existed.
    logprobMismatch: trained.logprobMismatch ?? null,
    publishProbeMeanAbsDiff: published?.probeMeanAbsDiff ?? null,
    durationSeconds: (Date.now() - started) / 1000,
  });
  await control.recordStep({ runId, summary });
  setCurrentDetails(`step ${step}: done, base success ${(summary.baseSuccessRate * 100).toFixed(1)}%`);
  return summary;
}
