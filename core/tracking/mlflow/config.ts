/**
 * The `tracking.mlflow` section of a run config. Workflow code bundles it
 * (through core/config.ts): no I/O here. Where the tracking server is comes
 * from the worker's environment ($MLFLOW_TRACKING_URI), not from the config.
 */
import { z } from 'zod';

export const MlflowTrackingConfig = z.strictObject({
  experiment: z
    .string()
    .min(1)
    .max(500)
    .optional()
    .describe("The MLflow experiment the run is logged in, created when missing; the run config's name when absent."),
  runName: z.string().min(1).max(250).optional().describe("The MLflow run's name; the Harness-S run id when absent."),
});
export type MlflowTrackingConfig = z.infer<typeof MlflowTrackingConfig>;
