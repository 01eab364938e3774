/** `harness-s mlflow ...`: an MLflow tracking server for runs with `tracking.mlflow` (mlflow from PyPI, 3.x). */
import path from 'node:path';
import type { Command } from 'commander';
import { DATA_DIR } from '../../infra/temporal-dev-server';
import { DEFAULT_MLFLOW_BACKEND, DEFAULT_MLFLOW_PORT } from '../../infra/mlflow/server';
import { UserError } from '../runs';
import { action, positiveInt, print, printJson, progress, withStore, examplesText, optionWithDefault } from './shared';

const RUN_ENDS = ['FINISHED', 'FAILED'] as const;

export function registerMlflowCommands(program: Command): void {
  const mlflow = program
    .command('mlflow')
    .description('an MLflow tracking server for experiment tracking (tracking.mlflow in a run config)')
    .addHelpText('after', examplesText('mlflow setup', 'mlflow serve', 'mlflow sync <run>'));
  mlflow
    .command('setup')
    .description('install mlflow into a Python 3.11 venv ($HARNESS_S_MLFLOW_HOME, default ~/.cache/harness-s/mlflow; reused when there)')
    .option('--json', 'print the install: {"venv","mlflow"}')
    .addHelpText('after', examplesText('mlflow setup', 'mlflow setup --json'))
    .action(
      action(async (opts: { json?: boolean }) => {
        const { setupMlflow } = await import('../../infra/mlflow/install');
        const installed = await setupMlflow(progress);
        if (opts.json) printJson(installed);
        else print(`mlflow: ${installed.venv}`);
      }),
    );
  mlflow
    .command('serve')
    .description(
      "start `mlflow server` on 127.0.0.1 (Ctrl-C stops it), runs in PostgreSQL and artifacts in a folder; point the workers' MLFLOW_TRACKING_URI at it",
    )
    .option('--port <n>', 'port', positiveInt('--port'), DEFAULT_MLFLOW_PORT)
    .option(
      '--backend-store-uri <uri>',
      'where runs and metrics go (a postgresql:// database is created when missing)',
      DEFAULT_MLFLOW_BACKEND,
    )
    .addOption(
      optionWithDefault(
        '--artifacts-destination <dir>',
        'the folder artifacts (run reports) go to',
        path.join(DATA_DIR, 'mlflow-artifacts'),
        '.data/mlflow-artifacts in the checkout',
      ),
    )
    .addHelpText('after', examplesText('mlflow serve', 'mlflow serve --port 5001 --artifacts-destination /srv/mlflow-artifacts'))
    .action(
      action(async (opts: { port: number; backendStoreUri: string; artifactsDestination: string }) => {
        const { setupMlflow } = await import('../../infra/mlflow/install');
        const { startMlflowServer } = await import('../../infra/mlflow/server');
        const install = await setupMlflow(progress);
        progress(
          `starting mlflow server on 127.0.0.1:${opts.port} (backend ${opts.backendStoreUri}, artifacts in ${opts.artifactsDestination})`,
        );
        const server = await startMlflowServer({
          port: opts.port,
          backendStoreUri: opts.backendStoreUri,
          artifactsDir: opts.artifactsDestination,
          install,
        });
        progress(`MLflow at ${server.url}; on the control workers: export MLFLOW_TRACKING_URI=${server.url}. Ctrl-C stops it`);
        const stop = () => void server.stop();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
        const code = await new Promise<number | null>((resolve) => server.process.once('exit', resolve));
        if (code !== 0 && code !== null) throw new Error(`mlflow server exited with code ${code}`);
      }),
    );
  mlflow
    .command('sync <run>')
    .description(
      "log to MLflow ($MLFLOW_TRACKING_URI) what the run store holds of a run with tracking.mlflow and MLflow lacks (what a worker could not log while MLflow was down), as the workers' trackRun does",
    )
    .option(
      '--end <status>',
      "also upload the run's report and end its MLflow run: FINISHED or FAILED (for a run that ended while MLflow was down)",
    )
    .option('--json', 'print what was logged')
    .addHelpText('after', examplesText('mlflow sync <run>', 'mlflow sync <run> --end FINISHED --json'))
    .action(
      action(async (runId: string, opts: { end?: string; json?: boolean }) => {
        if (opts.end !== undefined && !(RUN_ENDS as readonly string[]).includes(opts.end))
          throw new UserError(`--end: give ${RUN_ENDS.join(' or ')}, not ${opts.end}`);
        const { createTrackingActivities } = await import('../../activities/tracking');
        const { trackingEndpointsFromEnv } = await import('../../core/tracking/registry');
        const { createLogger } = await import('../../workers/logger');
        const { loadRunReport, runReportPage } = await import('../../core/report/run-report');
        await withStore(async (store) => {
          if (!(await store.getRun(runId)))
            throw new UserError(
              `no run ${runId} in the run store ($DATABASE_URL selects the database; \`harness-s run list\` shows the runs)`,
            );
          const { trackRun } = createTrackingActivities({
            store,
            logger: createLogger('harness-s-mlflow-sync'),
            trackingEndpoints: trackingEndpointsFromEnv(),
            runReport: async (id) => runReportPage(await loadRunReport(store, id)),
          });
          const result = await trackRun({ runId, ...(opts.end ? { final: opts.end as (typeof RUN_ENDS)[number] } : {}) });
          if (result.trackers.length === 0) throw new UserError(`run ${runId} has no tracking section in its config: nothing to log`);
          if (opts.json) printJson(result);
          else
            for (const t of result.trackers)
              print(
                t.ok
                  ? `${t.tracker}: ${t.stepsLogged} steps and ${t.evaluationsLogged} evaluations logged`
                  : `${t.tracker}: not logged: ${t.error}`,
              );
          const failed = result.trackers.find((t) => !t.ok);
          if (failed) throw new UserError(`${failed.tracker}: ${failed.error}`);
        });
      }),
    );
}
