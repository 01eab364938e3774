/** `harness-s` appworld ...: AppWorld and its fixture world. */
import type { Command } from 'commander';
import { progress, print, printJson, action, examplesText } from './shared';

export function registerAppWorldCommands(program: Command): void {
  const appworld = program
    .command('appworld')
    .description('AppWorld (the appworld package from PyPI) and its offline fixture world')
    .addHelpText('after', examplesText('appworld setup', 'run start --config examples/appworld.json'));
  appworld
    .command('setup')
    .description(
      'install appworld into a Python 3.11 venv and build the fixture world ($HARNESS_S_APPWORLD_HOME, default ~/.cache/harness-s/appworld; reused when there)',
    )
    .option('--json', 'print the install: {"python","appworld","cache","fixtureRoot"}')
    .addHelpText('after', examplesText('appworld setup', 'appworld setup --json'))
    .action(
      action(async (opts: { json?: boolean }) => {
        const { setupAppWorld } = await import('../../infra/appworld/install');
        const started = Date.now();
        const installed = await setupAppWorld(progress);
        progress(`appworld ready in ${Math.round((Date.now() - started) / 1000)} s: fixture world ${installed.fixtureRoot}`);
        if (opts.json) printJson(installed);
        else
          print(`appworld: ${installed.appworld}\nAPPWORLD_CACHE: ${installed.cache}\nAPPWORLD_ROOT (fixture): ${installed.fixtureRoot}`);
      }),
    );
}
