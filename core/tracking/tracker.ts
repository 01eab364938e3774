/**
 * What an experiment tracker does for a run (core/tracking/export.ts drives
 * it), and how one joins: a registration with its config schema, the worker
 * environment variable that says where its server is, and its factory.
 */
import type { z } from 'zod';

/** One value of one metric at one training step. */
export interface MetricPoint {
  key: string;
  value: number;
  step: number;
  /** Milliseconds since the epoch: when the step (or evaluation) was recorded, so a second log writes the same point. */
  timestamp: number;
}

export interface Param {
  key: string;
  value: string;
}

/** The tracker's own run for a Harness-S run. */
export interface TrackedRun {
  externalRunId: string;
  experimentId: string;
}

export interface TrackedRunFacts {
  /** The Harness-S run id: the tracker's run is tagged with it, so it is found again. */
  runId: string;
  /** The run config's name. */
  name: string;
  env: string;
  createdAt: Date;
}

export interface Tracker {
  /** The tracker's run for this Harness-S run: the one tagged with its id if there is one (a retry after a crash), else a new one. */
  openRun(run: TrackedRunFacts): Promise<TrackedRun>;
  logParams(run: TrackedRun, params: readonly Param[]): Promise<void>;
  logMetrics(run: TrackedRun, points: readonly MetricPoint[]): Promise<void>;
  uploadArtifact(run: TrackedRun, name: string, body: string, contentType: string): Promise<void>;
  endRun(run: TrackedRun, status: 'FINISHED' | 'FAILED', endTime: Date): Promise<void>;
}

export interface TrackerRegistration<C = unknown> {
  /** Its key under the config's `tracking` section, and its name in the store (tracking_exports.tracker). */
  name: string;
  /** The environment variable of the control workers that says where its server is. */
  endpointEnv: string;
  config: z.ZodType<C>;
  create(endpoint: string, section: C): Tracker;
}
