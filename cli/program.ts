/**
 * The `harness-s` command tree, built without running it (cli/main.ts parses
 * argv with it; the help test walks it).
 *
 * One module per command group, in cli/commands/: stack.ts (dev, demo, and
 * bench from cli/bench.ts, which holds the bench command beside its
 * report), runs.ts (run ...), setup.ts, engines.ts, doctor.ts (doctor,
 * sim-matrix), dbbench.ts, swe.ts, appworld.ts, openenv.ts, eval.ts,
 * compare.ts, reports.ts (profiles show, report, export), config.ts and
 * pool.ts. shared.ts holds output, exit codes and option parsers. They are
 * registered in the order `--help` lists them.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { PROJECT_ROOT } from '../infra/temporal-cli';
import { EXIT_CODES_HELP, examplesText } from './commands/shared';
import { registerStackCommands } from './commands/stack';
import { registerUiCommands } from './commands/ui';
import { registerSetupCommand } from './commands/setup';
import { registerDoctorCommands } from './commands/doctor';
import { registerRunCommands } from './commands/runs';
import { registerEngineCommands } from './commands/engines';
import { registerDbBenchCommands } from './commands/dbbench';
import { registerSweCommands } from './commands/swe';
import { registerAppWorldCommands } from './commands/appworld';
import { registerEvalCommand } from './commands/eval';
import { registerOpenEnvCommands } from './commands/openenv';
import { registerMlflowCommands } from './commands/mlflow';
import { registerCompareCommand } from './commands/compare';
import { registerReportCommands } from './commands/reports';
import { registerConfigCommands } from './commands/config';
import { registerPoolCommands } from './commands/pool';

export function buildProgram(): Command {
  const program = new Command('harness-s')
    .description('Harness-S training runs on Temporal (sim cluster by default)')
    .version(packageVersion(), '-V, --version', "print harness-s's version")
    // Program options only before a command: `profiles show <run> --version 3` is the command's own --version.
    .enablePositionalOptions()
    .addHelpText(
      'after',
      `${examplesText(
        'demo                 # the stack and a SIMULATED run, in one command',
        'dev                  # keep the stack up; then, in another terminal:',
        'run start --config examples/sim-quickstart.json --wait',
        'run status <run>',
        'run --help           # the commands of a group',
      )}

Results go to stdout (with --json: one JSON document), progress to stderr.

${EXIT_CODES_HELP}`,
    );

  registerStackCommands(program);
  registerUiCommands(program);
  registerRunCommands(program);
  registerSetupCommand(program);
  registerEngineCommands(program);
  registerDoctorCommands(program);
  registerDbBenchCommands(program);
  registerSweCommands(program);
  registerAppWorldCommands(program);
  registerOpenEnvCommands(program);
  registerMlflowCommands(program);
  registerEvalCommand(program);
  registerCompareCommand(program);
  registerReportCommands(program);
  registerConfigCommands(program);
  registerPoolCommands(program);

  // Usage errors (unknown option, missing argument, bad value, no subcommand) exit 2; --help and --version exit 0.
  for (const command of allCommands(program)) command.exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));
  return program;
}

/** The version in package.json. */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

/** Every command under `command`, itself first. */
export function allCommands(command: Command): Command[] {
  return [command, ...command.commands.flatMap((c) => allCommands(c))];
}
