/**
 * Catching a run's tracker up with the run store: what is stored and not yet
 * logged is logged, then marked as logged. Called after each step and
 * evaluation and once at the end; any call may fail half way (the tracker
 * down) and the next one finishes the job. A double log writes the same
 * points (the figures and timestamps come from the stored rows), which
 * MLflow keeps once.
 */
import { parseStoredRunConfig } from '../config';
import type { RunStore } from '../store/run-store';
import type { RunEnd, TrackingExport } from '../store/tracking-store';
import { evaluationMetricPoints, flattenConfig, stepMetricPoints } from './figures';
import type { MetricPoint, Tracker, TrackedRun } from './tracker';

export interface ExportRunArgs {
  store: RunStore;
  /** The tracker's registered name (tracking_exports.tracker). */
  trackerName: string;
  tracker: Tracker;
  runId: string;
  /** The run is over (how): upload its report and end the tracker's run so; null while it goes on. */
  final: RunEnd | null;
  /** The run's HTML report, uploaded as `report.html` at the end (none when absent). */
  report?: (runId: string) => Promise<string>;
  now?: () => Date;
}

export interface ExportOutcome {
  externalRunId: string;
  stepsLogged: number;
  evaluationsLogged: number;
  reportLogged: boolean;
  endedAs: RunEnd | null;
}

export async function exportRun(args: ExportRunArgs): Promise<ExportOutcome> {
  const { store, trackerName: name, tracker, runId } = args;
  const run = await store.getRun(runId);
  if (!run) throw new Error(`run ${runId} is not in the run store`);
  let done: TrackingExport = await store.tracking.export(runId, name);

  let tracked: TrackedRun;
  if (done.externalRunId && done.experimentId) {
    tracked = { externalRunId: done.externalRunId, experimentId: done.experimentId };
  } else {
    tracked = await tracker.openRun({ runId, name: run.name, env: run.env, createdAt: run.createdAt });
    // Stored before anything is logged; a crash before this line is found again by the run's tag.
    await store.tracking.setExternalRun(runId, name, tracked.externalRunId, tracked.experimentId);
    done = (await store.tracking.find(runId, name))!;
  }

  if (!done.paramsLogged) {
    // The config the run started with (or has now): params cannot change once logged, so later changes stay in the run store.
    const config = parseStoredRunConfig(run.config, `stored config of run ${runId}`);
    await tracker.logParams(tracked, [...flattenConfig(config), { key: 'harness_s.run_id', value: runId }]);
    await store.tracking.markParamsLogged(runId, name);
  }

  const steps = (await store.steps(runId)).filter((s) => done.loggedSteps[String(s.step)] !== s.completedAt.getTime());
  const evaluationTimes = await store.tracking.evaluationTimes(runId);
  const evaluations = (await store.evaluations(runId)).flatMap((summary) => {
    const at = evaluationTimes.get(summary.afterSteps);
    return at && done.loggedEvaluations[String(summary.afterSteps)] !== at.getTime() ? [{ summary, at }] : [];
  });
  const points: MetricPoint[] = [
    ...steps.flatMap((s) => stepMetricPoints(s.summary, s.completedAt)),
    ...evaluations.flatMap((e) => evaluationMetricPoints(e.summary, e.at)),
  ];
  if (points.length > 0) await tracker.logMetrics(tracked, points);
  if (steps.length > 0)
    await store.tracking.markStepsLogged(runId, name, Object.fromEntries(steps.map((s) => [String(s.step), s.completedAt.getTime()])));
  if (evaluations.length > 0) {
    await store.tracking.markEvaluationsLogged(
      runId,
      name,
      Object.fromEntries(evaluations.map((e) => [String(e.summary.afterSteps), e.at.getTime()])),
    );
  }

  let { reportLogged, endedAs } = done;
  // Ended once per way it ends: a failed run recovered and then finished gets its final report and status too.
  if (args.final && endedAs !== args.final) {
    if (args.report) {
      // Uploading again overwrites: a call that crashed after the upload repeats it harmlessly.
      await tracker.uploadArtifact(tracked, 'report.html', await args.report(runId), 'text/html; charset=utf-8');
      await store.tracking.markReportLogged(runId, name);
      reportLogged = true;
    }
    await tracker.endRun(tracked, args.final, (args.now ?? (() => new Date()))());
    await store.tracking.markEnded(runId, name, args.final);
    endedAs = args.final;
  }
  await store.tracking.setLastError(runId, name, null);
  return { externalRunId: tracked.externalRunId, stepsLogged: steps.length, evaluationsLogged: evaluations.length, reportLogged, endedAs };
}
