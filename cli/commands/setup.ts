/** `harness-s` setup: the Temporal CLI and the run store. */
import type { Command } from 'commander';
import { databaseUrlFromEnv, migrate } from '../../core/store/run-store';
import { ensureTemporalCli, temporalCliVersion } from '../../infra/temporal-cli';
import { progress, action, printJson, examplesText } from './shared';

export function registerSetupCommand(program: Command): void {
  program
    .command('setup')
    .description('install what the project needs beside npm packages: the Temporal CLI (if missing) and the run store schema')
    .option('--json', 'print {"temporalCli": {"version", "path"}, "runStore"} (the database host and name)')
    .addHelpText('after', examplesText('setup', 'setup --json'))
    .action(
      action(async (opts: { json?: boolean }) => {
        const cli = await ensureTemporalCli(progress);
        const version = temporalCliVersion(cli);
        progress(`Temporal CLI: ${version} at ${cli.path}`);
        const databaseUrl = databaseUrlFromEnv();
        await migrate(databaseUrl);
        const runStore = `${new URL(databaseUrl).host}${new URL(databaseUrl).pathname}`;
        progress(`run store migrated: ${runStore}`);
        if (opts.json) printJson({ temporalCli: { version, path: cli.path }, runStore });
      }),
    );
}
