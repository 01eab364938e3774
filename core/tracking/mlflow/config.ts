/**
 * The `tracking.mlflow` section of a run config. Workflow code bundles it
 * (through core/config.ts): no I/O here. Where the tracking server is comes
 * from the worker's environment ($MLFLOW_TRACKING_URI), not from the config.
 */
import { z } from 'zod';

export const MlflowTrackingConfig = z.strictObject({
  /** The MLflow experiment the run is logged in, created when missing; default: the run config's `name`. */
  experiment: z.string().min(1).max(500).optional(),
  /** The MLflow run's name; default: the Harness-S run id. */
  runName: z.string().min(1).max(250).optional(),
});
export type MlflowTrackingConfig = z.infer<typeof MlflowTrackingConfig>;
