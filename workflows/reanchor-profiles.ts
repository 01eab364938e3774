/**
 * reanchorProfiles: the probe pass behind the router's behaviour profiles, at
 * run start and at every re-anchoring. Every harness of the pool rolls out with
 * the given policy version on a fixed probe sample of tasks plus the tasks of
 * recent dead groups; the evidence becomes a new profile version in the store.
 */
import { patched, proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ReanchorProfilesInput } from './definitions';
import { controlActivityOptions, rolloutActivityOptions } from './activity-options';
import { groupOrFailure } from './failures';

export async function reanchorProfiles(input: ReanchorProfilesInput): Promise<{ version: number; cells: number; shift: number | null }> {
  const { runId, config, version, policyVersion, harnessIds } = input;
  const control = proxyActivities<Activities>(controlActivityOptions(config.retry));
  const rollout = proxyActivities<Activities>(rolloutActivityOptions(config.retry));
  const phase = `probe-v${version}`;
  const fixed = await control.sampleTasks({ runId, purpose: 'probe', step: 0 });
  const known = new Set(fixed.map((t) => t.taskId));
  const extra = (input.extraTaskIds ?? []).filter((id) => !known.has(id));
  const tasks = [...fixed, ...(extra.length ? await control.describeTasks({ runId, taskIds: extra }) : [])];
  const skipsFailedTasks = patched('failed-groups');
  let done = 0;
  let failed = 0;
  setCurrentDetails(`probing ${tasks.length} tasks x ${harnessIds.length} harnesses`);
  await Promise.all(
    tasks.map(async (task) => {
      const probe = () =>
        rollout.runRolloutGroup({
          runId,
          phase,
          step: 0,
          taskId: task.taskId,
          role: 'probe',
          policyVersion,
          plan: harnessIds.map((harnessId) => ({ harnessId, samples: config.router.probeRollouts })),
        });
      // A task that fails for good adds no evidence; the profiles come from the others.
      if (skipsFailedTasks && 'failed' in (await groupOrFailure(probe))) failed += 1;
      else if (!skipsFailedTasks) await probe();
      done += 1;
      setCurrentDetails(`probing: ${done}/${tasks.length} tasks done${failed ? `, ${failed} failed` : ''}`);
    }),
  );
  return control.saveProfiles({ runId, phase, version, policyVersion, taskIds: tasks.map((t) => t.taskId), fixedTaskIds: [...known] });
}
