/** `harness-s` setup: the Temporal CLI and the run store. */
import type { Command } from 'commander';
import { databaseUrlFromEnv, migrate } from '../../core/store/run-store';
import { ensureTemporalCli, temporalCliVersion } from '../../infra/temporal-cli';
import { progress, action } from './shared';

export function registerSetupCommand(program: Command): void {
  program
    .command('setup')
    .description('install what the project needs beside npm packages: the Temporal CLI (if missing) and the run store schema')
    .action(
      action(async () => {
        const cli = await ensureTemporalCli(progress);
        progress(`Temporal CLI: ${temporalCliVersion(cli)} at ${cli.path}`);
        const databaseUrl = databaseUrlFromEnv();
        await migrate(databaseUrl);
        progress(`run store migrated: ${new URL(databaseUrl).host}${new URL(databaseUrl).pathname}`);
      }),
    );
}
