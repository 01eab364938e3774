/**
 * `harness-s bench`: brings up a private stack (infra/bench/stack.ts: the
 * embedded stack's parts on a Temporal dev server of its own; the bench
 * starts its own sim clusters), measures the orchestration
 * overhead, the step time per latency profile and staleness bound, and the
 * history sizes (infra/bench/bench.ts), and prints the table (or --json).
 * The table goes to stdout, progress to stderr.
 */
import path from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import type { RunConfigInput } from '../core/config';
import { benchJson, benchText } from '../core/bench/figures';
import { benchPlan, runBench } from '../infra/bench/bench';
import { latencyProfileNames } from '../infra/bench/sim-latency';
import { startBenchStack } from '../infra/bench/stack';
import { DATA_DIR } from '../infra/temporal-dev-server';
import { PROJECT_ROOT } from '../infra/temporal-cli';
import { createLogger } from '../workers/logger';
import { readConfigFile, rootCauseMessage, UserError } from './runs';
import { examplesText } from './commands/shared';
import { processSettings } from '../core/settings';

/** The runs of (b) are shaped like this example (rescue on). */
const ROW_CONFIG_FILE = path.join(PROJECT_ROOT, 'examples', 'sim-transfer.json');

interface BenchCliOptions {
  quick?: boolean;
  profiles?: string;
  steps?: number;
  speedup?: number;
  json?: boolean;
}

function progress(line: string): void {
  process.stderr.write(`${line}\n`);
}

function number(name: string, min: number, integer: boolean) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
      throw new InvalidArgumentError(`${name} must be a ${integer ? 'whole ' : ''}number of at least ${min} (got '${value}')`);
    }
    return n;
  };
}

/** The profiles asked for, each one the sim cluster has. */
function profilesOf(list: string | undefined, known: string[]): string[] | undefined {
  if (list === undefined) return undefined;
  const profiles = list
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const unknown = profiles.filter((p) => !known.includes(p));
  if (profiles.length === 0 || unknown.length) {
    throw new UserError(
      `--profiles: ${unknown.length ? `unknown profile ${unknown.map((p) => `'${p}'`).join(', ')}` : 'none given'}; the sim cluster has: ${known.join(', ')}`,
    );
  }
  return profiles;
}

async function bench(opts: BenchCliOptions): Promise<void> {
  const allProfiles = latencyProfileNames();
  const plan = benchPlan({
    quick: opts.quick,
    profiles: profilesOf(opts.profiles, allProfiles),
    steps: opts.steps,
    speedup: opts.speedup,
    allProfiles,
  });
  const { raw } = readConfigFile(ROW_CONFIG_FILE);
  const started = Date.now();
  progress(
    `bench: (a) ${plan.sizes.map((s) => s.tasks * s.groupSize).join(' and ')} rollouts per step; (b) profiles ${plan.profiles.join(', ')} x k = ${plan.staleness.join(', ')}, ${plan.steps} steps each, speedup ${plan.speedup}x`,
  );
  // Quiet: the bench says what it does; errors still show (LOG_LEVEL for more).
  const logger = createLogger('harness-s', processSettings().logLevel ?? 'error');
  const stack = await startBenchStack({ logger, log: progress });
  progress(`Temporal Web UI while the bench runs: ${stack.uiUrl}`);
  try {
    const result = await runBench({
      ...plan,
      client: stack.client,
      store: stack.store,
      rowConfig: raw as RunConfigInput,
      dataDir: path.join(DATA_DIR, 'bench'),
      logger,
      log: progress,
    });
    progress(`bench finished in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    if (opts.json) progress(`machine: ${result.machine.cpus} CPUs, Node ${result.machine.node}`);
    process.stdout.write(`${opts.json ? benchJson(result) : benchText(result)}\n`);
  } finally {
    await stack.stop();
  }
}

/** The `bench` command, for cli/main.ts. */
export function benchCommand(): Command {
  return new Command('bench')
    .description(
      'measure orchestration overhead per rollout (in-process vs Temporal), step time and throughput sync vs pipelined under each SIMULATED latency profile, and history sizes',
    )
    .option('--quick', 'a subset: 512 rollouts only, profile balanced, k = 0 and 1, 3 steps (under two minutes on 2 cores)')
    .option('--profiles <list>', 'comma-separated latency profiles (default: all of core/latency-profiles.json)')
    .option('--steps <n>', 'steps per run of (b)', number('--steps', 1, true))
    .option(
      '--speedup <x>',
      'simulated seconds per real second of the latency model (default 30; the own CPU time of the stack is magnified by it too: 10 keeps the phases within a few % of their modelled time)',
      number('--speedup', 1, false),
    )
    .option('--json', 'machine-readable: {"overhead" (the 512-rollout figures), "overheadBySize", "rows", "history"}')
    .addHelpText('after', examplesText('bench --quick', 'bench --profiles balanced --steps 5 --json > bench.json'))
    .action(async (opts: BenchCliOptions) => {
      try {
        await bench(opts);
        process.exit(process.exitCode ?? 0);
      } catch (err) {
        progress(`harness-s: ${err instanceof Error ? rootCauseMessage(err) : String(err)}`);
        process.exit(err instanceof UserError ? 2 : 1);
      }
    });
}
