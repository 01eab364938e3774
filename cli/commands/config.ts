/** `harness-s` config ...: run configs. */
import type { Command } from 'commander';
import { writeFileSync } from 'node:fs';
import { runConfigJsonSchema } from '../../core/config';
import { readConfigFile, UserError } from '../runs';
import { print, action, missingFiles, examplesText } from './shared';

export function registerConfigCommands(program: Command): void {
  const config = program
    .command('config')
    .description('run configs: check one, or print their JSON Schema')
    .addHelpText('after', examplesText('config check examples/sim-quickstart.json', 'config schema --out run-config.schema.json'));
  config
    .command('schema')
    .description('the JSON Schema of a run config (for the Temporal UI and editors)')
    .option('--out <file>', 'write it to a file instead of stdout')
    .addHelpText('after', examplesText('config schema', 'config schema --out examples/run-config.schema.json'))
    .action(
      action(async (opts: { out?: string }) => {
        const schema = JSON.stringify(runConfigJsonSchema(), null, 2);
        if (opts.out) writeFileSync(opts.out, `${schema}\n`);
        else print(schema);
      }),
    );
  config
    .command('check <file>')
    .description('validate a run config file: every bad or unknown field is named, and every file it names must exist')
    .action(
      action(async (file: string) => {
        const { config: parsed } = readConfigFile(file);
        const missing = missingFiles(parsed);
        if (missing.length)
          throw new UserError(
            `${file}: ${missing.map((m) => `${m.path}: ${m.file} does not exist`).join('; ')} (paths are read by the workers, from their working directory)`,
          );
        print(
          `${file}: valid (${parsed.env.kind}, ${parsed.steps} steps, B=${parsed.rollout.tasksPerStep}, G=${parsed.rollout.groupSize})`,
        );
      }),
    );
}
