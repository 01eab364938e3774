/** `harness-s ui`: the trajectory viewer over the run store ($DATABASE_URL). */
import type { Command } from 'commander';
import { databaseUrlFromEnv, dbPoolSizeFromEnv } from '../../core/store/run-store';
import { namespaceFromEnv, temporalAddressFromEnv } from '../../workers/temporal-env';
import { DEFAULT_UI_HOST, viewerAddressFromEnv } from '../../core/viewer-address';
import { serveRunStore } from '../../viewer/server';
import { action, positiveInt, progress, examplesText } from './shared';

export function registerUiCommands(program: Command): void {
  program
    .command('ui')
    .description(
      'serve the trajectory viewer: runs, steps, groups, routing decisions and every rollout, read-only from the run store ($DATABASE_URL); Ctrl-C stops it',
    )
    .option('--port <n>', 'port (default $HARNESS_S_UI_PORT, else 8240)', positiveInt('--port'))
    .option('--host <address>', `address to listen on (default $HARNESS_S_UI_HOST, else ${DEFAULT_UI_HOST}: this machine only)`)
    .addHelpText('after', examplesText('ui', 'ui --port 8241 --host 0.0.0.0'))
    .action(
      action(async (opts: { port?: number; host?: string }) => {
        const fromEnv = viewerAddressFromEnv();
        const viewer = await serveRunStore({
          databaseUrl: databaseUrlFromEnv(),
          dbPoolSize: dbPoolSizeFromEnv(),
          temporalAddress: temporalAddressFromEnv(),
          namespace: namespaceFromEnv(),
          host: opts.host ?? fromEnv.host,
          port: opts.port ?? fromEnv.port,
          onError: (err, path) => progress(`viewer: ${path} failed: ${err.message}`),
        });
        progress(`trajectory viewer at ${viewer.url}/runs (read-only). Ctrl-C stops it.`);
        await new Promise<void>((resolve) => {
          process.once('SIGINT', resolve);
          process.once('SIGTERM', resolve);
        });
        await viewer.close();
      }),
    );
}
