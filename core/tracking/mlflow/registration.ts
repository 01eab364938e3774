/**
 * MLflow as a tracker: the run is an MLflow run in the section's experiment,
 * tagged `harness_s.run_id`, so a retry that crashed between creating it and
 * storing its id finds it again instead of making a second one.
 */
import type { MetricPoint, Param, Tracker, TrackedRun, TrackedRunFacts, TrackerRegistration } from '../tracker';
import { MAX_METRICS_PER_BATCH, MAX_PARAM_VALUE_LENGTH, MAX_PARAMS_PER_BATCH, MlflowClient } from './client';
import { MlflowTrackingConfig } from './config';

export const RUN_ID_TAG = 'harness_s.run_id';
const MAX_KEY_LENGTH = 250;

export function mlflowTrackerFor(client: MlflowClient, section: MlflowTrackingConfig): Tracker {
  return {
    async openRun(run: TrackedRunFacts): Promise<TrackedRun> {
      const experimentId = await client.ensureExperiment(section.experiment ?? run.name);
      const filter = `tags.\`${RUN_ID_TAG}\` = '${run.runId.replace(/'/g, "\\'")}'`;
      const [existing] = await client.searchRuns([experimentId], filter, 1);
      const found =
        existing ??
        (await client.createRun({
          experimentId,
          runName: section.runName ?? run.runId,
          startTime: run.createdAt.getTime(),
          tags: { [RUN_ID_TAG]: run.runId, 'harness_s.env': run.env, 'harness_s.name': run.name },
        }));
      return { externalRunId: found.info.run_id, experimentId };
    },

    async logParams(run: TrackedRun, params: readonly Param[]): Promise<void> {
      const fitted = params.map((p) => ({ key: p.key.slice(0, MAX_KEY_LENGTH), value: p.value.slice(0, MAX_PARAM_VALUE_LENGTH) }));
      for (let i = 0; i < fitted.length; i += MAX_PARAMS_PER_BATCH)
        await client.logBatch(run.externalRunId, { params: fitted.slice(i, i + MAX_PARAMS_PER_BATCH) });
    },

    async logMetrics(run: TrackedRun, points: readonly MetricPoint[]): Promise<void> {
      for (let i = 0; i < points.length; i += MAX_METRICS_PER_BATCH)
        await client.logBatch(run.externalRunId, { metrics: points.slice(i, i + MAX_METRICS_PER_BATCH) });
    },

    async uploadArtifact(run: TrackedRun, name: string, body: string, contentType: string): Promise<void> {
      await client.uploadArtifact(await client.getRun(run.externalRunId), name, body, contentType);
    },

    async endRun(run: TrackedRun, status: 'FINISHED' | 'FAILED', endTime: Date): Promise<void> {
      await client.updateRun(run.externalRunId, status, endTime.getTime());
    },
  };
}

export const mlflowTracker: TrackerRegistration<MlflowTrackingConfig> = {
  name: 'mlflow',
  endpointEnv: 'MLFLOW_TRACKING_URI',
  config: MlflowTrackingConfig,
  create: (endpoint, section) => mlflowTrackerFor(new MlflowClient({ trackingUri: endpoint }), section),
};
