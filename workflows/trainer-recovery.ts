/**
 * The run's trainer model made anew: restored from the latest checkpoint
 * after the trainer lost it, or a fork's first model loaded from its parent's
 * checkpoint. Both publish the loaded policy before any rollout uses it.
 *
 * Workflow code: deterministic, no I/O.
 */
import { ApplicationFailure, condition, proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { RunConfig } from '../core/config';
import { FAILURE_TYPES } from '../core/failure-types';
import { type ParentRun, type RestoreEvent, type RunStatus, SEARCH_ATTRIBUTES } from './definitions';
import { trainerActivityOptions } from './activity-options';
import { publishPolicyVersion } from './publish';

/** What recovery needs of its run. */
export interface RecoveryHost {
  readonly runId: string;
  readonly status: RunStatus;
  readonly config: RunConfig;
  pause(reason: string): void;
  details(now: string): void;
  untilDone<T>(what: string, child: () => Promise<T>): Promise<T>;
}

/**
 * The trainer lost the run's model: a new model loads the latest checkpoint
 * (or starts over from the base when the run has none; with
 * `checkpoint.onLoss: pause` the run first pauses and waits for a resume),
 * the restored policy is published before any rollout uses it, and the run
 * goes on from the step after the loaded one. What the steps after it stored
 * stays in the store, marked superseded by this restore.
 */
export async function restoreLostModel(
  run: RecoveryHost,
  lost: { modelId: string | null; message: string },
  atStep: number,
): Promise<void> {
  const { status } = run;
  const trainer = proxyActivities<Activities>(trainerActivityOptions(run.config.retry));
  const reason = `the trainer lost the run's model at step ${atStep}: ${lost.message}`;
  run.details(`restoring the trainer model (lost at step ${atStep})`);
  const restore = (allowBase: boolean) =>
    run.untilDone(`restoring the trainer model`, () =>
      trainer.restoreTrainer({ runId: run.runId, atStep, reason, lostModelId: lost.modelId, allowBase }),
    );
  let restored = await restore(run.config.checkpoint.onLoss !== 'pause');
  if ('needsDecision' in restored) {
    run.pause(
      `${reason}. The run has no checkpoint yet and checkpoint.onLoss is 'pause': resume to start its model over from the base ` +
        `(harness-s run resume ${run.runId}), or cancel it`,
    );
    run.details(`paused: ${status.pauseReason}`);
    await condition(() => !status.paused);
    restored = await restore(true);
    if ('needsDecision' in restored)
      throw ApplicationFailure.nonRetryable(`restore of run ${run.runId} did not start its model over`, FAILURE_TYPES.TrainerModelLost);
  }
  const r = restored;
  if (r.samplerPath !== null && r.fromStep !== null) {
    const fromStep = r.fromStep;
    await run.untilDone(`publishing the restored policy`, () =>
      publishPolicyVersion(
        {
          runId: run.runId,
          step: fromStep,
          policyVersion: r.policyVersion,
          samplerPath: r.samplerPath!,
          probeOf: { runId: run.runId, step: fromStep },
        },
        run.config.retry,
      ),
    );
  }
  const event: RestoreEvent = {
    restore: r.restore,
    kind: r.kind === 'base' ? 'base' : 'checkpoint',
    fromStep: r.fromStep,
    atStep: r.atStep,
    at: r.at,
    reason: r.reason,
  };
  status.restores = [...status.restores, event];
  status.step = r.nextStep;
  status.policyVersion = r.policyVersion;
  status.recentSteps = status.recentSteps.filter((s) => s.step < r.nextStep);
  status.lastStep = status.recentSteps.at(-1) ?? null;
  if (status.lastEvaluation && status.lastEvaluation.afterSteps > r.nextStep) status.lastEvaluation = null;
  upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.step, value: status.step }]);
  const from = r.fromStep === null ? 'the base model (no checkpoint yet)' : `the checkpoint of step ${r.fromStep}`;
  run.details(`restored the trainer model from ${from} after losing it at step ${atStep}; re-running steps ${r.nextStep}..${atStep}`);
}

/** A fork's first model: loaded from the parent's checkpoint, its policy published before the first step. */
export async function loadForkedModel(run: RecoveryHost, fork: ParentRun): Promise<void> {
  const { status } = run;
  const trainer = proxyActivities<Activities>(trainerActivityOptions(run.config.retry));
  run.details(`loading the trainer model from run ${fork.runId}'s checkpoint of step ${fork.step}`);
  const loaded = await run.untilDone("loading the fork's trainer model", () =>
    trainer.restoreTrainer({
      runId: run.runId,
      atStep: status.step,
      reason: `fork of run ${fork.runId} from step ${fork.step}`,
      lostModelId: null,
      allowBase: false,
      fork: { parentRunId: fork.runId, atOrBeforeStep: fork.step },
    }),
  );
  if ('needsDecision' in loaded || loaded.samplerPath === null || loaded.fromStep === null) {
    throw ApplicationFailure.nonRetryable(
      `run ${fork.runId} has no checkpoint to fork from at or before step ${fork.step}`,
      FAILURE_TYPES.NoCheckpointError,
    );
  }
  const fromStep = loaded.fromStep;
  await run.untilDone('publishing the forked policy', () =>
    publishPolicyVersion(
      {
        runId: run.runId,
        step: fromStep,
        policyVersion: loaded.policyVersion,
        samplerPath: loaded.samplerPath!,
        probeOf: { runId: fork.runId, step: fromStep },
      },
      run.config.retry,
    ),
  );
  status.policyVersion = loaded.policyVersion;
}
