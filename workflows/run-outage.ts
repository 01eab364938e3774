/**
 * Outage pausing: a child that fails because an endpoint is down pauses the
 * run and runs again once resumed, the current policy republished first.
 *
 * Workflow code: deterministic, no I/O.
 */
import { condition, patched } from '@temporalio/workflow';
import { outageOf, runFailure } from './failures';
import { republishPolicyVersion } from './publish';
import { withPublish } from './replica-status';
import type { HarnessSRun } from './run-state';
import { details } from './run-status';

/**
 * A child (a step, a probe pass) until it succeeds: when an endpoint it
 * needs is down past its retries, the run pauses itself with the reason and
 * runs it again once resumed; the store keeps what was done, so nothing is
 * lost or done twice. Any other failure ends the run, its root cause on top.
 */
export async function untilDone<T>(run: HarnessSRun, what: string, child: () => Promise<T>): Promise<T> {
  const pausesOnOutage = patched('pause-on-outage');
  let republishFirst = false;
  for (;;) {
    try {
      // After a resume: the inference replicas that came back get the current version before the child runs again.
      if (republishFirst) await republish(run, run.status.step - 1);
      return await child();
    } catch (err) {
      const outage = outageOf(err);
      if (!pausesOnOutage) throw err;
      if (outage === null) throw runFailure(err);
      run.pause(`${what} stopped: ${outage.replace(/\.$/, '')}. Once it is back: harness-s run resume ${run.runId}`);
      details(run, `paused in ${what}: ${run.status.pauseReason}`);
      await condition(() => !run.status.paused);
      republishFirst = patched('republish-on-resume');
    }
  }
}

/**
 * Loads the run's current policy version again on every replica that lacks
 * it (a resume, a recovery): nothing while the run samples the base model.
 */
export async function republish(run: HarnessSRun, step: number): Promise<void> {
  const { status } = run;
  if (step < 0 || status.policyVersion === run.config.policy.model) return;
  const outcome = await republishPolicyVersion({ runId: run.runId, step, policyVersion: status.policyVersion }, run.config.retry);
  if (outcome && outcome.replicas.length > 0) status.replicas = withPublish(status.replicas ?? [], outcome.replicas);
}
