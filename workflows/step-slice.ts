/**
 * trainingStepSlice: one slice of a training step too large for one history
 * (core/rl/step-slices.ts), the child workflow `<step workflow id>/slice-<i>`.
 * It plays its tasks' base and rescue groups as the step would
 * (step-groups.ts) and returns their summaries; the step assembles, trains
 * and publishes. A few times while it plays (every 1/8 of its tasks) it tells
 * the step how far it is, so the run shows the step's groups done; the number
 * of those signals does not grow with the time the slice takes.
 *
 * A group that fails for good is recorded in the result; an outage or a
 * user's error fails the slice, and with it the step (the run pauses or fails
 * as for any step).
 */
import { getExternalWorkflowHandle, setCurrentDetails, workflowInfo } from '@temporalio/workflow';
import type { DrawnGroup } from '../core/rl/batch-fill';
import type { FailedGroup } from '../core/rl/step-summary';
import { sliceReportDue } from '../core/rl/step-slices';
import { sliceProgressSignal, type StepSliceInput, type StepSliceResult } from './definitions';
import { taskPlayer } from './step-groups';

export async function trainingStepSlice(input: StepSliceInput): Promise<StepSliceResult> {
  const { step, slice, first, tasks } = input;
  const stepWorkflowId = workflowInfo().parent?.workflowId ?? null;
  const failedGroups: FailedGroup[] = [];
  let groupsDone = 0;
  let rescuesStarted = 0;
  const details = () => {
    const failed = failedGroups.length ? `, ${failedGroups.length} failed` : '';
    setCurrentDetails(
      `step ${step}, slice ${slice} (tasks ${first}-${first + tasks.length - 1}): ${groupsDone}/${tasks.length} base groups done, ${rescuesStarted} rescues started${failed}`,
    );
  };
  details();

  const playTask = taskPlayer({
    ...input,
    keepsFailedGroups: true,
    onFailed: (failed) => void failedGroups.push(failed),
    onBaseDone: () => {
      groupsDone += 1;
      details();
      // The step's result carries the last count: no signal once every group is done.
      if (stepWorkflowId === null || groupsDone === tasks.length || !sliceReportDue(groupsDone, tasks.length)) return;
      void getExternalWorkflowHandle(stepWorkflowId)
        .signal(sliceProgressSignal, { slice, groupsDone, rescuesStarted, failedGroups: failedGroups.length })
        .catch(() => undefined);
    },
    onRescueStarted: () => {
      rescuesStarted += 1;
      details();
    },
  });
  const groups: DrawnGroup[] = await Promise.all(tasks.map(async (task, i) => ({ index: first + i, ...(await playTask(task)) })));
  return { groups, failedGroups, rescuesStarted };
}
