/**
 * The `tracking` section of a run config: one optional sub-section per
 * registered tracker, each tracker's schema in its own folder
 * (core/tracking/<name>/config.ts); its registration (core/tracking/registry.ts)
 * holds the same schema object. Workflow code bundles this module, so nothing
 * here reaches outside.
 */
import { z } from 'zod';
import { MlflowTrackingConfig } from './mlflow/config';

export const TrackingConfig = z.strictObject({
  mlflow: MlflowTrackingConfig.optional().describe(
    "Log the run to the MLflow tracking server at the control workers' $MLFLOW_TRACKING_URI; not logged when absent.",
  ),
});
export type TrackingConfig = z.infer<typeof TrackingConfig>;

/** The trackers a config turns on, by name. */
export function trackersOf(tracking: Readonly<Record<string, unknown>> | undefined): string[] {
  return Object.entries(tracking ?? {}).flatMap(([name, section]) => (section === undefined ? [] : [name]));
}
