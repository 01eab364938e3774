/** `harness-s` config ...: run configs. */
import type { Command } from 'commander';
import { writeFileSync } from 'node:fs';
import { runConfigFileJsonSchema } from '../../core/config';
import { evolutionConfigFileJsonSchema } from '../../core/evolution/config';
import { configReferenceMarkdown } from '../../infra/config-reference';
import { readConfigFile, UserError } from '../runs';
import { print, action, missingFiles } from './shared';

export function registerConfigCommands(program: Command): void {
  const config = program.command('config').description('run configs');
  config
    .command('schema')
    .description('the JSON Schema of a run config file (for the Temporal UI and editors)')
    .option('--out <file>', 'write it to a file instead of stdout')
    .option('--reference <file>', 'also write the Markdown reference of every run and evolution config field (docs/config.md)')
    .action(
      action(async (opts: { out?: string; reference?: string }) => {
        const schema = JSON.stringify(runConfigFileJsonSchema(), null, 2);
        if (opts.out) writeFileSync(opts.out, `${schema}\n`);
        else print(schema);
        if (opts.reference)
          writeFileSync(opts.reference, configReferenceMarkdown(runConfigFileJsonSchema(), evolutionConfigFileJsonSchema()));
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
