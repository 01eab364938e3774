/** `harness-s` config ...: run and evolution configs. */
import { Option, type Command } from 'commander';
import { writeFileSync } from 'node:fs';
import { runConfigFileJsonSchema } from '../../core/config';
import { evolutionConfigFileJsonSchema } from '../../core/evolution/config';
import { configReferenceMarkdown } from '../../infra/config-reference';
import { checkConfigFile, configCheckText, CONFIG_KINDS, type ConfigKind } from '../config-check';
import { print, printJson, progress, action, examplesText } from './shared';

const CHECK_HELP = `
Examples:
  $ harness-s config check examples/swe.json
  $ harness-s config check examples/evolve-sim.json --json

It prints the endpoints the config will use (policy, trainer, env servers) and
warns when the policy and the trainer are from different worlds (a real model
trained by the SIMULATED trainer, or the reverse) or a real trainer has the
simulator's learning rate. Warnings do not fail the check.

Exit codes: 0 valid (warnings or not), 2 invalid (a bad field, a file not found), 1 any other failure.`;

export function registerConfigCommands(program: Command): void {
  const config = program
    .command('config')
    .description('run and evolution configs: check one, or print their JSON Schema')
    .addHelpText('after', examplesText('config check examples/sim-quickstart.json', 'config schema --out run-config.schema.json'));
  config
    .command('schema')
    .description('the JSON Schema of a run config file (for the Temporal UI and editors)')
    .option('--out <file>', 'write it to a file instead of stdout')
    .addHelpText('after', examplesText('config schema', 'config schema --out examples/run-config.schema.json'))
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
    .description(
      'check a run or evolution config file without any service: every bad or unknown field is named, every file it names must exist; prints the endpoints it will use and warns on mixed worlds',
    )
    .addOption(new Option('--kind <kind>', 'check it as this kind of config (default: told from its fields)').choices(CONFIG_KINDS))
    .option('--json', 'print {file, kind, valid, summary, errors, warnings, endpoints} as JSON')
    .addHelpText('after', CHECK_HELP)
    .action(
      action(async (file: string, opts: { kind?: ConfigKind; json?: boolean }) => {
        const result = checkConfigFile(file, { kind: opts.kind });
        if (!result.valid) process.exitCode = 2;
        if (opts.json) return printJson(result);
        const { out, err } = configCheckText(result);
        if (err) progress(`harness-s: ${err}`);
        if (out) print(out);
      }),
    );
}
