/** `harness-s` compare: ablations with paired CIs. */
import type { Command } from 'commander';
import path from 'node:path';
import { startEmbeddedStack } from '../../infra/embedded-stack';
import { createLogger } from '../../workers/logger';
import { connectClient, readConfigFile, UserError } from '../runs';
import { budgetStepCap, budgetText, COMPARE_ARMS, compareText, parseBudget, planCompare, runCompare } from '../compare';
import { writeCompareReport } from '../report/compare-report';
import { progress, print, printJson, action, withStore, positiveInt, examplesText } from './shared';
import { SIM_KIND } from '../../core/sim-kind';
import { processSettings } from '../../core/settings';

export function registerCompareCommand(program: Command): void {
  program
    .command('compare')
    .description('ablation: run each arm on the same seeds and tasks, and print their figures side by side')
    .requiredOption('--config <file>', 'run config (or workflow input) every arm starts from')
    .option('--arms <list>', `comma-separated, of: ${Object.keys(COMPARE_ARMS).join(', ')}`, 'policy-only,harness-s,random-k')
    .option('--seeds <list>', 'comma-separated seeds', '1,2,3')
    .option('--steps <n>', "override the config's steps", positiveInt('--steps'))
    .option('--parallel <n>', 'runs at once', positiveInt('--parallel'), 3)
    .option(
      '--world <file>',
      "sim configs: the world every arm runs on (the embedded sim cluster loads it too; with --attach, start your sim cluster with the same --world); default: the config's env.world, else the shipped world",
    )
    .option('--pool <hash>', 'the frozen pool (from `harness-s pool evolve`) the harness-s-pool arm rescues with')
    .option('--attach', 'use the Temporal server and workers at $TEMPORAL_ADDRESS instead of starting the embedded stack')
    .option(
      '--budget <spend>',
      "equal budget instead of equal steps: rollouts=N or tokens=N (policy prompt + completion tokens); each arm trains until its steps have spent N, then evaluates; --steps caps the steps (default: for rollouts, what the cheapest arm needs; for tokens, 10 x the config's steps)",
    )
    .option('--report <dir>', 'also write the compare report (curves per arm with seed bands, the difference CIs) to DIR/index.html')
    .option(
      '--json',
      'machine-readable: {"arms": {"<arm>": {...figures, "spend": {"rollouts", "policyTokens", "trainerTokens", "gpuSeconds"?}}}, "diffs": {"<arm> - <arm>": {"<figure>": {"mean", "lo", "hi", "excludesZero"}}}, ...}',
    )
    .addHelpText(
      'after',
      examplesText(
        'compare --config examples/sim-quickstart.json',
        'compare --config examples/sim-transfer.json --arms policy-only,harness-s --seeds 1,2,3,4 --report .data/compare',
        'compare --config examples/sim-quickstart.json --budget rollouts=3000 --json',
      ),
    )
    .action(
      action(
        async (opts: {
          config: string;
          arms: string;
          seeds: string;
          steps?: number;
          parallel: number;
          world?: string;
          pool?: string;
          attach?: boolean;
          budget?: string;
          report?: string;
          json?: boolean;
        }) => {
          const seeds = opts.seeds.split(',').map((v) => {
            const n = Number(v.trim());
            if (v.trim() === '' || !Number.isInteger(n) || n < 0)
              throw new UserError(`--seeds: '${v}' is not a whole number >= 0 (give e.g. --seeds 1,2,3)`);
            return n;
          });
          const arms = opts.arms
            .split(',')
            .map((a) => a.trim())
            .filter(Boolean);
          const { raw } = readConfigFile(opts.config);
          const world = opts.world === undefined ? undefined : path.resolve(opts.world);
          const budget = opts.budget === undefined ? undefined : parseBudget(opts.budget);
          const steps = opts.steps ?? (budget ? budgetStepCap(raw, budget) : undefined);
          const plan = planCompare(steps ? { ...(raw as object), steps } : raw, arms, seeds, new Date(), world, opts.pool, budget);
          progress(
            `compare: ${arms.length} arms x ${seeds.length} seeds = ${plan.length} runs, ${opts.parallel} at a time` +
              (budget ? `; each arm until it has spent ${budgetText(budget)} (at most ${plan[0].config.steps} steps)` : ''),
          );
          const simWorld = plan[0].config.env.kind === SIM_KIND ? plan[0].config.env.world : undefined;
          const stack = opts.attach
            ? null
            : await startEmbeddedStack({
                logger: createLogger('harness-s', processSettings().logLevel ?? 'warn'),
                log: progress,
                world: simWorld,
              });
          try {
            const result = await runCompare({ client: await connectClient(), plan, parallel: opts.parallel, progress, budget });
            if (opts.json) printJson(result);
            else print(compareText(result));
            if (opts.report) {
              const dir = opts.report;
              await withStore(async (store) => progress(`compare report: ${await writeCompareReport({ store, result, dir })}`));
            }
            if (result.failures.length) process.exitCode = 1;
          } finally {
            await stack?.stop();
          }
        },
      ),
    );
}
