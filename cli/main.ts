/**
 * `harness-s`: bring up the embedded stack, launch and operate runs.
 * Progress goes to stderr, results to stdout; --json for scripts.
 *
 * One module per command group, in cli/commands/: stack.ts (dev, demo, and
 * bench from cli/bench.ts, which holds the bench command beside its
 * report), runs.ts (run ...), setup.ts, engines.ts, doctor.ts (doctor,
 * sim-matrix), dbbench.ts, swe.ts, appworld.ts, openenv.ts, eval.ts,
 * compare.ts, reports.ts (profiles show, report, export), config.ts and
 * pool.ts. shared.ts holds output, exit codes and option parsers. They are
 * registered in the order `--help` lists them.
 */
import { Command } from 'commander';
import { progress } from './commands/shared';
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

const program = new Command('harness-s').description('Harness-S training runs on Temporal (sim cluster by default)');

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

program.parseAsync().catch((err) => {
  progress(`harness-s: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
