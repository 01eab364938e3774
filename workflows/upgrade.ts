/**
 * Workflow inputs and activity results as histories recorded them, brought
 * to the shape this version reads, once, where a workflow receives them.
 * Each fills an absent field with what the code assumed before the field
 * existed, so a replayed history behaves as it did; a value that is there is
 * kept as it is.
 */
import { CheckpointConfig, PipelineConfig, SamplingConfig, type RunConfig } from '../core/config';
import { DEFAULT_ROLLOUTS_PER_SLICE } from '../core/rl/step-slices';
import type { Activities, PublishSummary } from '../activities';
import type { TrainingStepInput } from './definitions';

type TrainStepResult = Awaited<ReturnType<Activities['trainStep']>>;

/**
 * A run's config as a history holds it. Sections absent from configs
 * recorded before they existed get the schema's defaults, which are what
 * the code read for them: no refill (`sampling`), one history per step up
 * to the measured slice size (`rollout.rolloutsPerSlice`), no overlap of
 * steps (`pipeline`), a lost model restarted from the base (`checkpoint`).
 * `eval`, `budget`, `health` and `tracking` stay absent: their absence
 * means "none" (see workflows/run-children.ts evaluates).
 */
export function upgradeRunConfig(config: RunConfig): RunConfig {
  const recorded: Partial<Pick<RunConfig, 'sampling' | 'pipeline' | 'checkpoint'>> = config;
  const rollout: Partial<Pick<RunConfig['rollout'], 'rolloutsPerSlice'>> = config.rollout;
  return {
    ...config,
    rollout: { ...config.rollout, rolloutsPerSlice: rollout.rolloutsPerSlice ?? DEFAULT_ROLLOUTS_PER_SLICE },
    sampling: recorded.sampling ?? SamplingConfig.parse({}),
    pipeline: recorded.pipeline ?? PipelineConfig.parse({}),
    checkpoint: recorded.checkpoint ?? CheckpointConfig.parse({}),
  };
}

/** A trainingStep input: its config as upgradeRunConfig reads it. */
export function upgradeStepInput(input: TrainingStepInput): TrainingStepInput {
  return { ...input, config: upgradeRunConfig(input.config) };
}

/** prepareRun's result: its config upgraded; no viewer link in results recorded before the viewer existed. */
export function upgradePrepared<T extends { config: RunConfig; viewerRunUrl?: string | null }>(
  prepared: T,
): T & { viewerRunUrl: string | null } {
  return { ...prepared, config: upgradeRunConfig(prepared.config), viewerRunUrl: prepared.viewerRunUrl ?? null };
}

/** trainStep's result: no mismatch (null) and no trainer tokens (0) in results recorded before they were measured. */
export function upgradeTrained(result: TrainStepResult): TrainStepResult {
  const recorded: Partial<Pick<TrainStepResult, 'logprobMismatch' | 'trainerTokens'>> = result;
  return { ...result, logprobMismatch: recorded.logprobMismatch ?? null, trainerTokens: recorded.trainerTokens ?? 0 };
}

/** publishPolicy's result (histories from before the fan-out): no probe difference (null) in results recorded before the probe. */
export function upgradePublishSummary(summary: PublishSummary): PublishSummary {
  const recorded: Partial<Pick<PublishSummary, 'probeMeanAbsDiff'>> = summary;
  return { ...summary, probeMeanAbsDiff: recorded.probeMeanAbsDiff ?? null };
}
