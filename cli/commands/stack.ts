/** `harness-s` dev, demo and bench: the embedded stack. */
import type { Command } from 'commander';
import path from 'node:path';
import { startEmbeddedStack } from '../../infra/embedded-stack';
import { PROJECT_ROOT } from '../../infra/temporal-cli';
import { createLogger } from '../../workers/logger';
import { metricsPortFromEnv } from '../../workers/metrics-server';
import { namespaceFromEnv } from '../../workers/temporal-env';
import { viewerAddressFromEnv } from '../../core/viewer-address';
import { dbPoolSizeFromEnv } from '../../core/store/run-store';
import { serveRunStore } from '../../viewer/server';
import { runDemo } from '../demo';
import { demoSummaryLines } from '../demo-summary';
import { benchCommand } from '../bench';
import { summaryText } from '../report';
import { progress, print, printJson, action, positiveInt, examplesText, optionWithDefault } from './shared';

export function registerStackCommands(program: Command): void {
  program
    .command('dev')
    .description(
      "bring up the embedded stack (Temporal dev server + UI, PostgreSQL migrations, SIMULATED cluster, workers) and keep it up; the workers' metrics at /metrics on $HARNESS_S_METRICS_PORT (default 9464, off for none); the trajectory viewer on $HARNESS_S_UI_PORT (default 8240)",
    )
    .addHelpText(
      'after',
      examplesText('dev', 'dev   # then, in another terminal: harness-s run start --config examples/sim-quickstart.json'),
    )
    .action(
      action(async () => {
        const viewerAddress = viewerAddressFromEnv(); // a bad port fails before anything starts
        const dbPoolSize = dbPoolSizeFromEnv();
        const stack = await startEmbeddedStack({ logger: createLogger('harness-s'), log: progress, metricsPort: metricsPortFromEnv() });
        const viewer = await serveRunStore({
          databaseUrl: stack.databaseUrl,
          dbPoolSize,
          temporalAddress: stack.temporal.address,
          namespace: namespaceFromEnv(),
          ...viewerAddress,
          onError: (err, at) => progress(`viewer: ${at} failed: ${err.message}`),
        }).catch((err: Error) => {
          // The stack is up and runs go on; only the viewer is missing.
          progress(`the trajectory viewer did not start: ${err.message}`);
          return null;
        });
        progress(
          `ready. Temporal ${stack.temporal.address}, Web UI ${stack.temporal.uiUrl}${viewer ? `, trajectory viewer ${viewer.url}/runs` : ''}. Ctrl-C stops.`,
        );
        let stopping = false;
        // A second Ctrl-C while stopping is ignored, so the dev server is never orphaned.
        const stop = () => {
          if (stopping) return;
          stopping = true;
          progress('stopping (workers finish their current tasks)...');
          void Promise.all([viewer?.close(), stack.stop()]).then(() => process.exit(0));
        };
        process.on('SIGINT', stop);
        process.on('SIGTERM', stop);
        await stack.workersDone;
      }),
    );

  program
    .command('demo')
    .description(
      'one command: bring up the stack, run a SIMULATED training run, evaluate the base policy before and after it, print a summary (base-harness success with its 95% interval, dead and rescued groups, Rank-1), stop the stack',
    )
    .addOption(
      optionWithDefault(
        '--config <file>',
        'run config',
        path.join(PROJECT_ROOT, 'examples', 'demo.json'),
        'the shipped examples/demo.json',
      ),
    )
    .option('--steps <n>', 'override the number of steps', positiveInt('--steps'))
    .option('--json', 'print the summary as JSON')
    .addHelpText('after', examplesText('demo', 'demo --config examples/sim-quickstart.json --steps 10', 'demo --json > summary.json'))
    .action(
      action(async (opts: { config: string; steps?: number; json?: boolean }) => {
        const summary = await runDemo({ configFile: opts.config, steps: opts.steps, log: progress });
        if (opts.json) printJson(summary);
        else print(`${summaryText(summary.run)}\n\n${demoSummaryLines(summary).join('\n')}`);
      }),
    );

  program.addCommand(benchCommand());
}
