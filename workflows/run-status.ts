/**
 * The run's status as text: its current details in the Web UI, and the steps
 * in flight as they show there.
 *
 * Workflow code: deterministic, no I/O.
 */
import { setCurrentDetails } from '@temporalio/workflow';
import { isSimulatedEnv } from '../core/sim-kind';
import type { InFlightStep, StepPhase } from './definitions';
import { replicaLines } from './replica-status';
import type { HarnessSRun } from './run-state';

export const STEP_PHASES: readonly StepPhase[] = ['rollouts', 'waiting-for-trainer', 'training', 'waiting-to-publish', 'publishing'];

/**
 * The run's current details in the Web UI: what the run is (as the CLI's
 * start summary says it; a run started from the UI has no other), then what
 * it does now.
 */
export function details(run: HarnessSRun, now: string): void {
  const { name, env, restores, parent } = run.status;
  const what = name ? `Harness-S run ${name} (${env}${isSimulatedEnv(env) ? ', SIMULATED' : ''})` : 'Harness-S run';
  const { health } = run.status;
  const lineage = [
    ...(health?.state === 'stalled' ? [`STALLED since step ${health.sinceStep}: ${health.reasons.join('; ')}`] : []),
    ...(parent ? [`forked from run ${parent.runId} at its checkpoint of step ${parent.step}`] : []),
    ...restores.map(
      (r) =>
        `restore ${r.restore} at ${r.at}: trainer lost the model at step ${r.atStep}; restored from ${r.fromStep === null ? 'the base' : `the checkpoint of step ${r.fromStep}`}, steps ${r.fromStep === null ? 0 : r.fromStep + 1}..${r.atStep} re-run`,
    ),
  ];
  const viewer = run.prepared?.viewerRunUrl ? [`steps, groups and rollouts: ${run.prepared.viewerRunUrl}`] : [];
  setCurrentDetails([what, ...lineage, now, ...replicaLines(run.status.replicas ?? []), ...viewer].join('\n'));
}

/** "step 5 training, step 6 rollouts 3/16": the steps in flight, as the run's current details show them. */
export function inFlightLine(inFlight: readonly InFlightStep[]): string {
  return inFlight
    .map((s) => {
      const failed = s.failedGroups ? `, ${s.failedGroups} failed` : '';
      return s.phase === 'rollouts'
        ? `step ${s.step} rollouts on ${s.policyVersion}: ${s.groupsDone}/${s.groups} base groups done, ${s.rescuesStarted} rescues started${failed}`
        : `step ${s.step} ${s.phase.replace(/-/g, ' ')}`;
    })
    .join('; ');
}
