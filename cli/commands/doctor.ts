/** `harness-s` doctor and sim-matrix: checking the machine and the sim world. */
import type { Command } from 'commander';
import { effectMatrixText, measureEffectMatrix } from '../../core/envs/sim/effect-matrix';
import { loadSimWorld } from '../../core/envs/sim/world';
import { PolicyClient } from '../../core/policy/client';
import { NO_API_KEY } from '../../core/secrets';
import { doctorText, runDoctor } from '../doctor';
import { print, printJson, action, positiveInt, examplesText } from './shared';

export function registerDoctorCommands(program: Command): void {
  program
    .command('doctor')
    .description('what is installed and reachable, with the fix for each missing piece')
    .option('--json', 'machine-readable')
    .addHelpText('after', examplesText('doctor', 'doctor --json'))
    .action(
      action(async (opts: { json?: boolean }) => {
        const report = await runDoctor();
        if (opts.json) printJson(report);
        else print(doctorText(report));
        if (!report.ok) process.exitCode = 1;
      }),
    );

  program
    .command('sim-matrix')
    .description('[SIMULATED] success rate of each harness on each task kind of a sim world, under its initial policy or a trained version')
    .option('--world <file>', 'sim world file (default: the shipped world)')
    .option(
      '--model <name>',
      'a policy version served by the sim cluster (e.g. <run>-<trainerModelId>-step-19); the initial policy in-process when absent',
    )
    .option('--base-url <url>', "the sim cluster's OpenAI-compatible endpoint, with --model", 'http://127.0.0.1:8765/v1')
    .option('--episodes <n>', 'episodes per cell', positiveInt('--episodes'), 400)
    .option('--max-turns <n>', "the run's max turns", positiveInt('--max-turns'), 5)
    .option('--json', 'machine-readable')
    .addHelpText(
      'after',
      examplesText(
        'sim-matrix',
        'sim-matrix --world examples/sim-worlds/scaffolded.json --episodes 200 --json',
        'sim-matrix --model <policy version>',
      ),
    )
    .action(
      action(async (opts: { world?: string; model?: string; baseUrl: string; episodes: number; maxTurns: number; json?: boolean }) => {
        const policy = opts.model
          ? { client: new PolicyClient({ baseUrl: opts.baseUrl, apiKey: NO_API_KEY, requestTimeoutSeconds: 30 }), model: opts.model }
          : undefined;
        const matrix = await measureEffectMatrix(loadSimWorld(opts.world), {
          episodes: opts.episodes,
          maxTurns: opts.maxTurns,
          seed: 1,
          policy,
        });
        if (opts.json) printJson(matrix);
        else print(effectMatrixText(matrix));
      }),
    );
}
