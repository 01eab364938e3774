/** `harness-s` swe ...: SWE tasks in a bubblewrap sandbox. */
import type { Command } from 'commander';
import { SHIPPED_SWE_SET, sweBench, sweBuild, sweReplay, sweSetup, sweValidate } from '../swe';
import { progress, print, printJson, action, positiveInt, examplesText, optionWithDefault } from './shared';

const SHIPPED = 'the shipped data/swe/instances.json';
/** --data: an instance set, the shipped one by default. */
const dataOption = (what: string) => optionWithDefault('--data <file>', what, SHIPPED_SWE_SET, SHIPPED);

export function registerSweCommands(program: Command): void {
  const swe = program
    .command('swe')
    .description('software-engineering tasks (SWE-bench format) in a bubblewrap sandbox')
    .addHelpText('after', examplesText('swe setup', 'swe replay', 'run start --config examples/swe.json'));
  swe
    .command('setup')
    .description(
      'build the instances of a set on this machine: each tree rebuilt from its PyPI release, the patches, the test venv (once; reused after)',
    )
    .addOption(dataOption('instance set'))
    .option('--json', 'print {"instances": FILE}')
    .addHelpText('after', examplesText('swe setup', 'swe setup --data my-instances.json --json'))
    .action(
      action(async (opts: { data: string; json?: boolean }) => {
        const built = sweSetup(opts.data, progress);
        if (opts.json) printJson({ instances: built });
        else print(built);
      }),
    );
  swe
    .command('build')
    .description(
      'make an instance from two PyPI source releases and add it to a set, if it validates (gold patch passes 3 times; without it, the fail-to-pass tests fail)',
    )
    .requiredOption('--package <name>', 'PyPI project')
    .requiredOption('--from <version>', 'the release the agent starts from')
    .requiredOption('--to <version>', 'the release whose code is the fix')
    .requiredOption('--statement <text>', 'the issue, as a user would report it (in your own words)')
    .requiredOption('--license <spdx>', "the package's license")
    .option('--pythonpath <dirs>', 'comma-separated folders of the tree put on PYTHONPATH', '.')
    .option('--pytest-args <args>', 'extra pytest arguments, comma-separated', '')
    .option('--test-files <files>', 'comma-separated test files to run (default: every test module the test patch touches)')
    .option('--id <id>', 'instance id (default <package>-<to>)')
    .addOption(optionWithDefault('--into <file>', 'the set file to add it to', SHIPPED_SWE_SET, SHIPPED))
    .option('--json', 'print {"instance", "set"}')
    .addHelpText(
      'after',
      examplesText(
        "swe build --package <name> --from <old version> --to <fixed version> --license MIT --statement '<the issue>' --into my-instances.json",
      ),
    )
    .action(
      action(
        async (opts: {
          package: string;
          from: string;
          to: string;
          statement: string;
          license: string;
          pythonpath: string;
          pytestArgs: string;
          testFiles?: string;
          id?: string;
          into: string;
          json?: boolean;
        }) => {
          const list = (v: string) =>
            v
              .split(',')
              .map((s) => s.trim())
              .filter(Boolean);
          const id = await sweBuild(
            {
              package: opts.package,
              from: opts.from,
              to: opts.to,
              statement: opts.statement,
              license: opts.license,
              pythonpath: list(opts.pythonpath),
              pytestArgs: list(opts.pytestArgs),
              testFiles: opts.testFiles ? list(opts.testFiles) : undefined,
              id: opts.id,
              into: opts.into,
            },
            progress,
          );
          if (opts.json) printJson({ instance: id, set: opts.into });
          else print(`added ${id} to ${opts.into}`);
        },
      ),
    );
  swe
    .command('validate')
    .description('validate every instance: the gold patch resolves it 3 times out of 3, and without it every fail-to-pass test fails')
    .addOption(dataOption('instance set or SWE-bench JSONL'))
    .option('--json', 'machine-readable')
    .addHelpText('after', examplesText('swe validate', 'swe validate --data my-instances.json --json'))
    .action(
      action(async (opts: { data: string; json?: boolean }) => {
        const result = await sweValidate(opts.data, progress);
        if (opts.json) printJson(result);
        else
          print(
            `swe validate: ${result.valid}/${result.total} valid${result.refused.map((r) => `\n  ${r.instanceId}: ${r.reason}`).join('')}`,
          );
        if (result.valid !== result.total) process.exitCode = 1;
      }),
    );
  swe
    .command('bench')
    .description('what episodes cost here: a sandboxed command, a fresh workspace, a scoring (benchmark figures, not a test)')
    .addOption(dataOption('instance set or SWE-bench JSONL'))
    .option('--commands <n>', 'sandboxed commands to time', positiveInt('--commands'), 50)
    .option('--json', 'machine-readable')
    .addHelpText('after', examplesText('swe bench', 'swe bench --commands 200 --json'))
    .action(
      action(async (opts: { data: string; commands: number; json?: boolean }) => {
        const b = await sweBench(opts.data, opts.commands, progress);
        if (opts.json) return printJson(b);
        print(`swe bench, ${b.instances} instances:`);
        print(
          `  sandboxed command (true): mean ${b.command.meanMs.toFixed(1)} ms, p50 ${b.command.p50Ms.toFixed(1)} ms, p95 ${b.command.p95Ms.toFixed(1)} ms over ${b.command.runs}`,
        );
        print(`  workspace (copy + give + remove): mean ${b.workspace.meanMs.toFixed(0)} ms, max ${b.workspace.maxMs} ms`);
        print(
          `  scoring the gold patch: mean ${b.scoring.meanSeconds.toFixed(2)} s, max ${b.scoring.maxSeconds.toFixed(2)} s (${b.scoring.maxInstance})`,
        );
      }),
    );
  swe
    .command('replay')
    .description('every instance scored with its gold patch (must resolve) and with none (must not)')
    .addOption(dataOption('instance set or SWE-bench JSONL'))
    .option('--concurrency <n>', 'instances at once', positiveInt('--concurrency'), 2)
    .option('--json', 'print {"total":N,"passed":N,"instances":[...]}')
    .addHelpText('after', examplesText('swe replay', 'swe replay --concurrency 1 --json'))
    .action(
      action(async (opts: { data: string; concurrency: number; json?: boolean }) => {
        const result = await sweReplay(opts.data, opts.concurrency, progress);
        if (opts.json) print(JSON.stringify(result));
        else {
          print(`swe replay: ${result.passed}/${result.total} passed`);
          for (const r of result.instances)
            print(
              `  ${r.instanceId.padEnd(36)} ${r.reason ?? 'ok'}  F2P ${r.failToPass}  P2P ${r.passToPass}  ${r.goldSeconds.toFixed(1)} s`,
            );
        }
        if (result.passed !== result.total) process.exitCode = 1;
      }),
    );
}
