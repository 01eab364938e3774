/** `harness-s` profiles show, report and export: what a run learned and made. */
import type { Command } from 'commander';
import { profilesText, profilesView } from '../profiles';
import { defaultReportDir, writeRunReport } from '../report/run-report-file';
import { exportRun, exportText } from '../export';
import { progress, print, printJson, action, withStore, positiveInt, nonNegativeInt, examplesText } from './shared';
import { isSimulatedEnv } from '../../core/sim-kind';
import { viewerUrlFromEnv } from '../../core/viewer-address';

export function registerReportCommands(program: Command): void {
  const profiles = program
    .command('profiles')
    .description("the router's behaviour profiles")
    .addHelpText('after', examplesText('profiles show <run>'));
  profiles
    .command('show <run>')
    .description('the sibling x task-kind rescue matrix (thin cells marked), its versions, and the router picks under each')
    .option('--version <n>', 'this profile version instead of the newest', positiveInt('--version'))
    .option('--json', 'machine-readable')
    .addHelpText('after', examplesText('profiles show <run>', 'profiles show <run> --version 3 --json'))
    .action(
      action(async (runId: string, opts: { version?: number; json?: boolean }) => {
        await withStore(async (store) => {
          const view = await profilesView(store, runId, opts.version);
          if (opts.json) return printJson(view);
          print(profilesText(view, isSimulatedEnv((await store.getRun(runId))?.env)));
        });
      }),
    );

  program
    .command('report <run>')
    .description("write a self-contained HTML page of a run's charts (inline SVG; viewing it needs no network)")
    .option('--out <dir>', 'directory for index.html (default .data/reports/<run>)')
    .option('--json', 'print {"runId", "file"}')
    .addHelpText('after', examplesText('report <run>', 'report <run> --out reports/my-run --json'))
    .action(
      action(async (runId: string, opts: { out?: string; json?: boolean }) => {
        await withStore(async (store) => {
          const file = await writeRunReport({ store, runId, dir: opts.out ?? defaultReportDir(runId), viewerUrl: viewerUrlFromEnv() });
          if (opts.json) printJson({ runId, file });
          else print(file);
        });
      }),
    );

  program
    .command('export <run>')
    .description(
      "write a step's policy as a LoRA adapter folder (adapter_config.json, the weights, a manifest) and check it loads in the run's inference server",
    )
    .requiredOption('--out <dir>', 'the folder to write (must not exist, or be empty)')
    .option('--step <n>', 'the trained step to export (default: the last)', nonNegativeInt('--step'))
    .option('--force', 'replace a folder that is not empty')
    .option('--no-check', 'skip loading it into the inference server')
    .option('--json', 'machine-readable: the folder, the manifest and the check')
    .addHelpText(
      'after',
      examplesText('export <run> --out adapters/my-run', 'export <run> --step 10 --out adapters/my-run-10 --no-check --json'),
    )
    .action(
      action(async (runId: string, opts: { out: string; step?: number; force?: boolean; check: boolean; json?: boolean }) => {
        const result = await withStore((store) =>
          exportRun(store, { runId, step: opts.step, outDir: opts.out, force: opts.force, check: opts.check }, progress),
        );
        if (opts.json) printJson(result);
        else print(exportText(result));
      }),
    );
}
