/**
 * evaluatePolicy: the policy judged on the eval split, under the base harness
 * and under Rank-1 routing (each task sent to the single best harness of its
 * kind by the current profiles), with the same executor rollouts per task.
 * When Rank-1 picks the base harness, both arms share those rollouts.
 */
import { ApplicationFailure, patched, proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { FAILURE_TYPES } from '../core/failure-types';
import { summarizeEvaluation, type EvaluatedTask, type EvaluationSummary } from '../core/rl/evaluation';
import type { EvaluatePolicyInput } from './definitions';
import { controlActivityOptions, rolloutActivityOptions } from './activity-options';
import { groupOrFailure } from './failures';

export async function evaluatePolicy(input: EvaluatePolicyInput): Promise<EvaluationSummary> {
  const { runId, config, afterSteps, policyVersion, profileVersion, baseHarnessId } = input;
  const control = proxyActivities<Activities>(controlActivityOptions(config.retry));
  const rollout = proxyActivities<Activities>(rolloutActivityOptions(config.retry));
  const R = config.eval.rollouts;
  const tasks = await control.sampleTasks({ runId, purpose: 'eval', step: 0 });
  const routes = await control.rank1Routes({ runId, profileVersion });
  const skipsFailedTasks = patched('failed-groups');
  let done = 0;
  let failed = 0;
  setCurrentDetails(`evaluating ${policyVersion}: ${tasks.length} tasks x ${R} rollouts, base harness and Rank-1`);
  const outcomes = await Promise.all(
    tasks.map(async (task): Promise<EvaluatedTask | null> => {
      const rank1Harness = routes[task.kind] ?? baseHarnessId;
      const group = (harnessId: string) =>
        rollout.runRolloutGroup({
          runId,
          phase: 'eval',
          step: afterSteps,
          taskId: task.taskId,
          role: 'eval',
          policyVersion,
          plan: [{ harnessId, samples: R }],
        });
      const arms = () => Promise.all([group(baseHarnessId), rank1Harness === baseHarnessId ? null : group(rank1Harness)]);
      // A task that fails for good under either arm leaves both, so the arms stay paired.
      const outcome = skipsFailedTasks ? await groupOrFailure(arms) : { group: await arms() };
      done += 1;
      if ('failed' in outcome) failed += 1;
      setCurrentDetails(`evaluating ${policyVersion}: ${done}/${tasks.length} tasks done${failed ? `, ${failed} failed` : ''}`);
      if ('failed' in outcome) return null;
      const [base, rank1] = outcome.group;
      return { taskId: task.taskId, kind: task.kind, base: base.rollouts, rank1: (rank1 ?? base).rollouts };
    }),
  );
  const evaluated = outcomes.filter((t): t is EvaluatedTask => t !== null);
  let summary: EvaluationSummary;
  try {
    summary = summarizeEvaluation({ afterSteps, policyVersion, profileVersion, rolloutsPerTask: R, rank1Routes: routes, tasks: evaluated });
  } catch (err) {
    // Unequal arms would make the comparison meaningless: fail the evaluation, not the workflow task forever.
    throw ApplicationFailure.nonRetryable((err as Error).message, FAILURE_TYPES.UnequalEvaluationArms);
  }
  await control.recordEvaluation({ runId, summary });
  return summary;
}
