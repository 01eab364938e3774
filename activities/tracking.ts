/**
 * trackRun: catches a run's experiment trackers (`tracking` in its config)
 * up with the run store (core/tracking/export.ts). It never fails the run: a
 * tracker that is down or refuses is logged as a warning and stored as the
 * export's last_error, and the next call (after the next step, evaluation, or
 * at the end) logs what was missed.
 */
import { parseStoredRunConfig } from '../core/config';
import type { RunEnd } from '../core/store/tracking-store';
import { exportRun } from '../core/tracking/export';
import { trackerRegistration } from '../core/tracking/registry';
import { trackersOf } from '../core/tracking/tracker-configs';
import type { ActivityDeps } from './run-context';

/** How long the end-of-run export waits for one still running (a step's); a step's export skips instead (the next one catches up). */
const FINAL_LOCK_WAIT_MS = 60_000;

export interface TrackRunResult {
  trackers: Array<{ tracker: string; ok: boolean; stepsLogged: number; evaluationsLogged: number; error?: string }>;
}

export function createTrackingActivities(deps: Pick<ActivityDeps, 'store' | 'logger' | 'trackingEndpoints' | 'runReport'>) {
  const { store, logger } = deps;

  async function recordFailure(runId: string, tracker: string, message: string): Promise<void> {
    logger.warn({ runId, tracker, err: message }, 'experiment tracking: not logged now; the next call catches up');
    await store.tracking
      .setLastError(runId, tracker, message)
      .catch((err: Error) => logger.warn({ runId, tracker, err: err.message }, 'experiment tracking: could not store the error either'));
  }

  return {
    /** Logs to each tracker the run's config names what it has not logged yet; `final` (how the run ended): the report and the run's end too. */
    async trackRun(input: { runId: string; final?: RunEnd }): Promise<TrackRunResult> {
      const result: TrackRunResult = { trackers: [] };
      let tracking: Record<string, unknown> | undefined;
      try {
        const run = await store.getRun(input.runId);
        tracking = run ? parseStoredRunConfig(run.config, `stored config of run ${input.runId}`).tracking : undefined;
      } catch (err) {
        logger.warn(
          { runId: input.runId, err: (err as Error).message },
          'experiment tracking: could not read the run; the next call catches up',
        );
        return result;
      }
      for (const name of trackersOf(tracking)) {
        const registration = trackerRegistration(name);
        const endpoint = deps.trackingEndpoints?.[name];
        if (!endpoint) {
          const message = `the run config asks for ${name} tracking (tracking.${name}), but this worker has no $${registration.endpointEnv}: set it on the control workers and restart them; nothing is logged until then`;
          await recordFailure(input.runId, name, message);
          result.trackers.push({ tracker: name, ok: false, stepsLogged: 0, evaluationsLogged: 0, error: message });
          continue;
        }
        try {
          const section = registration.config.parse(tracking?.[name]);
          const locked = await store.tracking.withExportLock(input.runId, name, input.final ? FINAL_LOCK_WAIT_MS : 0, () =>
            exportRun({
              store,
              trackerName: name,
              tracker: registration.create(endpoint, section),
              runId: input.runId,
              final: input.final ?? null,
              ...(deps.runReport ? { report: deps.runReport } : {}),
            }),
          );
          if (locked === null && input.final)
            throw new Error(
              `another export of this run held its lock for ${FINAL_LOCK_WAIT_MS / 1000} s; the run's end is not logged (harness-s mlflow sync RUN --end FINISHED catches it up)`,
            );
          if (locked === null) {
            logger.info(
              { runId: input.runId, tracker: name },
              'experiment tracking: an export of this run is running; it or the next one logs this',
            );
            result.trackers.push({ tracker: name, ok: true, stepsLogged: 0, evaluationsLogged: 0 });
            continue;
          }
          const outcome = locked.result;
          logger.info(
            {
              runId: input.runId,
              tracker: name,
              externalRunId: outcome.externalRunId,
              steps: outcome.stepsLogged,
              evaluations: outcome.evaluationsLogged,
              endedAs: outcome.endedAs,
            },
            'experiment tracking: logged',
          );
          result.trackers.push({ tracker: name, ok: true, stepsLogged: outcome.stepsLogged, evaluationsLogged: outcome.evaluationsLogged });
        } catch (err) {
          const message = (err as Error).message;
          await recordFailure(input.runId, name, message);
          result.trackers.push({ tracker: name, ok: false, stepsLogged: 0, evaluationsLogged: 0, error: message });
        }
      }
      return result;
    },
  };
}
