/**
 * `harness-s`: bring up the embedded stack, launch and operate runs.
 * Progress goes to stderr, results to stdout; --json for scripts.
 */
import path from 'node:path';
import { existsSync, writeFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { WorkflowFailedError } from '@temporalio/client';
import { filesNamedBy, runConfigJsonSchema, type RunConfig } from '../core/config';
import { SAFE_CONFIG_FIELDS } from '../core/config-change';
import { effectMatrixText, measureEffectMatrix } from '../core/envs/sim/effect-matrix';
import { loadSimWorld } from '../core/envs/sim/world';
import { PolicyClient } from '../core/policy/client';
import { NO_API_KEY } from '../core/secrets';
import { databaseUrlFromEnv, migrate, RunStore } from '../core/store/run-store';
import { startEmbeddedStack } from '../infra/embedded-stack';
import { ensureTemporalCli, PROJECT_ROOT, temporalCliVersion } from '../infra/temporal-cli';
import { diskUsage, setupEngines } from '../infra/engines/install';
import { enginesStatus, enginesStatusText, startEngines, stopEngines } from '../infra/engines/servers';
import { uiUrlFor } from '../infra/temporal-dev-server';
import { temporalAddressFromEnv } from '../workers/temporal-env';
import { createLogger } from '../workers/logger';
import { metricsPortFromEnv } from '../workers/metrics-server';
import { runDemo } from './demo';
import { benchCommand } from './bench';
import { evaluate } from './eval';
import { evalTable, evalTableText } from './eval-report';
import { createEnvironment, resolveHarness } from '../core/envs/registry';
import { replayDbBench } from '../core/envs/dbbench/replay';
import { doctorText, runDoctor } from './doctor';
import { lineageLines, statusText, summaryText } from './report';
import {
  cancelRun, changeRunConfig, connectClient, forkRun, historyStats, listRuns, newRunId, pauseRun, readConfigFile, readJsonFile, recoverRun, resumeRun, rootCauseMessage,
  runView, startRun, UserError, validateConfig,
} from './runs';
import { watchRun } from './watch';
import { profilesText, profilesView } from './profiles';
import { COMPARE_ARMS, compareText, planCompare, runCompare } from './compare';
import { defaultReportDir, writeRunReport } from './report/run-report';
import { writeCompareReport } from './report/compare-report';
import { effectText, evolutionJson, evolutionText, poolList, poolShowText, readEvolutionConfigFile, startEvolution } from './pools';
import { evolutionConfigJsonSchema } from '../core/evolution/config';
import { SHIPPED_SWE_SET, sweBench, sweBuild, sweReplay, sweSetup, sweValidate } from './swe';
import { exportRun, exportText } from './export';

function progress(line: string): void {
  process.stderr.write(`${line}\n`);
}
function print(text: string): void {
  process.stdout.write(`${text}\n`);
}
function printJson(value: unknown): void {
  print(JSON.stringify(value, null, 2));
}

function action<A extends unknown[]>(fn: (...args: A) => Promise<void>) {
  return async (...args: A) => {
    try {
      await fn(...args);
      process.exit(process.exitCode ?? 0);
    } catch (err) {
      progress(`harness-s: ${err instanceof WorkflowFailedError ? `run failed: ${rootCauseMessage(err)}` : err instanceof Error ? err.message : String(err)}`);
      process.exit(err instanceof UserError ? 2 : 1);
    }
  };
}

/** Runs `fn` with the run store ($DATABASE_URL), migrated, and closes it after. */
async function withStore<T>(fn: (store: RunStore) => Promise<T>): Promise<T> {
  const databaseUrl = databaseUrlFromEnv();
  await migrate(databaseUrl);
  const store = RunStore.connect(databaseUrl);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

function positiveInt(name: string) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${name} must be a whole number of at least 1 (got '${value}')`);
    return n;
  };
}

function nonNegativeInt(name: string) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a whole number of at least 0 (got '${value}')`);
    return n;
  };
}

const program = new Command('harness-s').description('Harness-S training runs on Temporal (sim cluster by default)');

program
  .command('dev')
  .description('bring up the embedded stack (Temporal dev server + UI, PostgreSQL migrations, SIMULATED cluster, workers) and keep it up; the workers\' metrics at /metrics on $HARNESS_S_METRICS_PORT (default 9464, off for none)')
  .action(action(async () => {
    const stack = await startEmbeddedStack({ logger: createLogger('harness-s'), log: progress, metricsPort: metricsPortFromEnv() });
    progress(`ready. Temporal ${stack.temporal.address}, Web UI ${stack.temporal.uiUrl}. Ctrl-C stops.`);
    let stopping = false;
    // A second Ctrl-C while stopping is ignored, so the dev server is never orphaned.
    const stop = () => {
      if (stopping) return;
      stopping = true;
      progress('stopping (workers finish their current tasks)...');
      void stack.stop().then(() => process.exit(0));
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    await stack.workersDone;
  }));

program
  .command('demo')
  .description('one command: bring up the stack, run a SIMULATED training run, print its summary')
  .option('--config <file>', 'run config (default: the shipped examples/sim-quickstart.json)', path.join(PROJECT_ROOT, 'examples', 'sim-quickstart.json'))
  .option('--steps <n>', 'override the number of steps', positiveInt('--steps'))
  .option('--json', 'print the summary as JSON')
  .action(action(async (opts: { config: string; steps?: number; json?: boolean }) => {
    const summary = await runDemo({ configFile: opts.config, steps: opts.steps, log: progress });
    if (opts.json) printJson(summary);
    else print(summaryText(summary));
  }));

program.addCommand(benchCommand());

const run = program.command('run').description('launch and operate runs');

run
  .command('start')
  .requiredOption('--config <file>', 'a RunConfig JSON file, or a workflow input {"config": {...}}')
  .option('--name <name>', 'run name (overrides the config)')
  .option('--id <id>', 'run id (the workflow id); default <name>-<timestamp>')
  .option('--wait', 'wait for the run to finish and print its summary')
  .action(action(async (opts: { config: string; name?: string; id?: string; wait?: boolean }) => {
    const { raw } = readConfigFile(opts.config);
    const named = opts.name ? { ...(raw as object), name: opts.name } : raw;
    const parsed = validateConfig(named, opts.config);
    const client = await connectClient();
    const runId = opts.id ?? newRunId(parsed.name);
    const handle = await startRun(client, named, parsed, runId);
    progress(`started run ${runId}; Web UI ${uiUrlFor(temporalAddressFromEnv())}/namespaces/default/workflows/${encodeURIComponent(runId)}`);
    print(runId);
    if (opts.wait) print(summaryText(await handle.result()));
  }));

run
  .command('status <id>')
  .option('--json', 'machine-readable')
  .action(action(async (id: string, opts: { json?: boolean }) => {
    const client = await connectClient();
    // Restores and a fork's parent come from the run store once the run has ended; without it, from the live status.
    const view = await withStore((store) => runView(client, id, store)).catch((err: unknown) => {
      if (err instanceof UserError) throw err;
      progress(`run store unreachable (${(err as Error).message}); showing what Temporal holds`);
      return runView(client, id);
    });
    if (opts.json) return printJson(view);
    if (view.live) print(statusText(view.live));
    else if (view.summary) print([`${view.status}`, summaryText(view.summary), ...lineageLines(view)].join('\n'));
    else print(`run ${id}: ${view.status}${view.failure ? `: ${view.failure}` : ''}${view.status === 'RUNNING' ? '' : '\n(resume it with `harness-s run recover ' + id + '`)'}${['', ...lineageLines(view)].join('\n')}`);
  }));

run
  .command('list')
  .option('--json', 'machine-readable')
  .option('--limit <n>', 'at most this many', positiveInt('--limit'), 50)
  .action(action(async (opts: { json?: boolean; limit: number }) => {
    const runs = await listRuns(await connectClient(), opts.limit);
    if (opts.json) return printJson(runs);
    if (runs.length === 0) return print('no runs');
    for (const r of runs) {
      print(`${r.runId.padEnd(44)} ${r.status.padEnd(11)} ${String(r.env ?? '-').padEnd(5)} step ${String(r.step ?? '-').padStart(3)}  base ${r.baseSuccess === null ? '-' : `${(r.baseSuccess * 100).toFixed(1)}%`}  ${r.startTime}`);
    }
  }));

run
  .command('pause <id>')
  .option('--reason <text>', 'shown in status')
  .action(action(async (id: string, opts: { reason?: string }) => {
    await pauseRun(await connectClient(), id, opts.reason);
    print(`pause requested: ${id} stops before its next step`);
  }));

run.command('resume <id>').action(action(async (id: string) => {
  await resumeRun(await connectClient(), id);
  print(`resumed: ${id}`);
}));

run
  .command('update <id> <change>')
  .description(`change safe settings of a running run, e.g. '{"steps": 40, "eval": {"every": 5}}' (safe: ${SAFE_CONFIG_FIELDS.join(', ')})`)
  .action(action(async (id: string, change: string) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(change);
    } catch (err) {
      throw new UserError(`the change must be JSON such as '{"steps": 40}': ${(err as Error).message}`);
    }
    const result = await changeRunConfig(await connectClient(), id, parsed);
    print(`run ${id}: config changed from step ${result.fromStep} (steps ${result.config.steps})`);
  }));

run.command('cancel <id>').action(action(async (id: string) => {
  await cancelRun(await connectClient(), id);
  print(`cancel requested: ${id}`);
}));

run
  .command('recover <id>')
  .description('continue a failed or terminated run in a new execution from its last completed step')
  .action(action(async (id: string) => {
    await withStore(async (store) => {
      const { resume, previousStatus } = await recoverRun(await connectClient(), store, id);
      print(
        resume
          ? `recovered ${id} (was ${previousStatus}): continues at step ${resume.nextStep} with policy ${resume.policyVersion}, profiles v${resume.profileVersion}`
          : `recovered ${id} (was ${previousStatus}): it had no profiles yet, so it starts over; stored rollouts are reused`,
      );
    });
  }));

run
  .command('fork <id>')
  .description("start a new run from a run's training checkpoint at or before a step (its config plus safe changes, its profiles and pool)")
  .requiredOption('--from-step <n>', 'the step whose checkpoint to start from (the newest at or before it)', nonNegativeInt('--from-step'))
  .option('--config <changes.json>', `a JSON file of safe changes, e.g. {"steps": 40} (safe: ${SAFE_CONFIG_FIELDS.join(', ')})`)
  .option('--id <id>', 'the new run id; default <run>-fork<step>-<time>')
  .option('--json', 'machine-readable')
  .action(action(async (id: string, opts: { fromStep: number; config?: string; id?: string; json?: boolean }) => {
    const change = opts.config ? readJsonFile(opts.config) : undefined;
    const forked = await withStore(async (store) => forkRun(await connectClient(), store, { parentRunId: id, fromStep: opts.fromStep, change, runId: opts.id }));
    if (opts.json) return printJson({ runId: forked.runId, parent: { runId: id, step: forked.checkpointStep }, resume: forked.resume });
    progress(`forked ${id} at its checkpoint of step ${forked.checkpointStep}: the new run starts at step ${forked.resume.nextStep} of ${forked.config.steps}`);
    print(forked.runId);
  }));

run
  .command('history <id>')
  .description('history sizes: events of the run execution and of each step child workflow')
  .option('--json', 'machine-readable')
  .action(action(async (id: string, opts: { json?: boolean }) => {
    const client = await connectClient();
    const view = await runView(client, id);
    const steps = view.summary?.stepsCompleted ?? view.live?.step ?? 0;
    const stats = await historyStats(client, id, steps);
    if (opts.json) return printJson(stats);
    print(`run ${id}: ${stats.runEvents} events in the current execution; ${stats.meanEventsPerStep.toFixed(1)} events per step child on average`);
    for (const s of stats.steps) print(`  step ${String(s.step).padStart(3)}: ${s.events} events`);
  }));

run
  .command('watch <id>')
  .description('live progress per step until the run ends')
  .action(action(async (id: string) => {
    await watchRun(await connectClient(), id, print);
  }));

program
  .command('setup')
  .description('install what the project needs beside npm packages: the Temporal CLI (if missing) and the run store schema')
  .action(action(async () => {
    const cli = await ensureTemporalCli(progress);
    progress(`Temporal CLI: ${temporalCliVersion(cli)} at ${cli.path}`);
    const databaseUrl = databaseUrlFromEnv();
    await migrate(databaseUrl);
    progress(`run store migrated: ${new URL(databaseUrl).host}${new URL(databaseUrl).pathname}`);
  }));

const engines = program
  .command('engines')
  .description('the real CPU stack: SkyRL\'s Tinker server (JAX) as the trainer and vLLM\'s CPU build as the inference server, with a tiny Qwen3 built locally');
engines
  .command('setup')
  .description('install it (about 10 GB into $HARNESS_S_ENGINES_HOME, default ~/.cache/harness-s/engines; reused when there)')
  .action(action(async () => {
    const started = Date.now();
    const installed = await setupEngines(progress);
    progress(`engines installed in ${Math.round((Date.now() - started) / 1000)} s: ${installed.home} (${(await diskUsage(installed.home) / 1e9).toFixed(1)} GB)`);
  }));
engines
  .command('up')
  .description('start both servers in the background and return once they answer (ports: $HARNESS_S_TRAINER_PORT, default 8100; $HARNESS_S_VLLM_PORT, default 8000)')
  .option('--json', 'machine-readable')
  .action(action(async (opts: { json?: boolean }) => {
    const status = await startEngines({ log: progress });
    if (opts.json) printJson(status);
    else print(enginesStatusText(status));
  }));
engines
  .command('down')
  .description('stop both servers')
  .action(action(async () => {
    await stopEngines({ log: progress });
  }));
engines
  .command('status')
  .description('installed? running? answering? and the run config fields that point at them')
  .option('--json', 'machine-readable')
  .action(action(async (opts: { json?: boolean }) => {
    const status = await enginesStatus();
    if (opts.json) printJson(status);
    else print(enginesStatusText(status));
  }));

program
  .command('doctor')
  .description('what is installed and reachable, with the fix for each missing piece')
  .option('--json', 'machine-readable')
  .action(action(async (opts: { json?: boolean }) => {
    const report = await runDoctor();
    if (opts.json) printJson(report);
    else print(doctorText(report));
    if (!report.ok) process.exitCode = 1;
  }));

program
  .command('sim-matrix')
  .description('[SIMULATED] success rate of each harness on each task kind of a sim world, under its initial policy or a trained version')
  .option('--world <file>', 'sim world file (default: the shipped world)')
  .option('--model <name>', 'a policy version served by the sim cluster (e.g. <runId>-<trainerModelId>-step-19); the initial policy in-process when absent')
  .option('--base-url <url>', 'the sim cluster\'s OpenAI-compatible endpoint, with --model', 'http://127.0.0.1:8765/v1')
  .option('--episodes <n>', 'episodes per cell', positiveInt('--episodes'), 400)
  .option('--max-turns <n>', 'the run\'s max turns', positiveInt('--max-turns'), 5)
  .option('--json', 'machine-readable')
  .action(action(async (opts: { world?: string; model?: string; baseUrl: string; episodes: number; maxTurns: number; json?: boolean }) => {
    const policy = opts.model
      ? { client: new PolicyClient({ baseUrl: opts.baseUrl, apiKey: NO_API_KEY, requestTimeoutSeconds: 30 }), model: opts.model }
      : undefined;
    const matrix = await measureEffectMatrix(loadSimWorld(opts.world), { episodes: opts.episodes, maxTurns: opts.maxTurns, seed: 1, policy });
    if (opts.json) printJson(matrix);
    else print(effectMatrixText(matrix));
  }));

const dbbench = program.command('dbbench').description('AgentBench DBBench on a MySQL-compatible server');
dbbench
  .command('replay')
  .description('every task through the real runtime and scoring with a scripted gold agent; accuracy per type')
  .requiredOption('--data <file>', 'AgentBench DBBench JSONL')
  .option('--concurrency <n>', 'episodes at once', positiveInt('--concurrency'), 4)
  .option('--mysql-url <url>', 'admin connection (default $DBBENCH_MYSQL_URL or the local server)')
  .option('--json', 'print {"total":N,"passed":N,"byType":{...}}')
  .action(action(async (opts: { data: string; concurrency: number; mysqlUrl?: string; json?: boolean }) => {
    const result = await replayDbBench({ file: opts.data, concurrency: opts.concurrency, adminUrl: opts.mysqlUrl });
    if (opts.json) return print(JSON.stringify({ total: result.total, passed: result.passed, byType: result.byType }));
    print(`replay: ${result.passed}/${result.total} passed (${result.episodesPerSecond.toFixed(1)} episodes/s at concurrency ${opts.concurrency})`);
    for (const [type, cell] of Object.entries(result.byType)) print(`  ${type.padEnd(24)} ${cell.passed}/${cell.total}`);
    if (result.passed !== result.total) process.exitCode = 1;
  }));

const swe = program.command('swe').description('software-engineering tasks (SWE-bench format) in a bubblewrap sandbox');
swe
  .command('setup')
  .description('build the instances of a set on this machine: each tree rebuilt from its PyPI release, the patches, the test venv (once; reused after)')
  .option('--data <file>', 'instance set', SHIPPED_SWE_SET)
  .option('--json', 'print {"instances": FILE}')
  .action(action(async (opts: { data: string; json?: boolean }) => {
    const built = sweSetup(opts.data, progress);
    if (opts.json) printJson({ instances: built });
    else print(built);
  }));
swe
  .command('build')
  .description('make an instance from two PyPI source releases and add it to a set, if it validates (gold patch passes 3 times; without it, the fail-to-pass tests fail)')
  .requiredOption('--package <name>', 'PyPI project')
  .requiredOption('--from <version>', 'the release the agent starts from')
  .requiredOption('--to <version>', 'the release whose code is the fix')
  .requiredOption('--statement <text>', 'the issue, as a user would report it (in your own words)')
  .requiredOption('--license <spdx>', "the package's license")
  .option('--pythonpath <dirs>', 'comma-separated folders of the tree put on PYTHONPATH', '.')
  .option('--pytest-args <args>', 'extra pytest arguments, comma-separated', '')
  .option('--test-files <files>', 'comma-separated test files to run (default: every test module the test patch touches)')
  .option('--id <id>', 'instance id (default <package>-<to>)')
  .option('--into <file>', 'the set file to add it to', SHIPPED_SWE_SET)
  .action(action(async (opts: { package: string; from: string; to: string; statement: string; license: string; pythonpath: string; pytestArgs: string; testFiles?: string; id?: string; into: string }) => {
    const list = (v: string) => v.split(',').map((s) => s.trim()).filter(Boolean);
    const id = await sweBuild({
      package: opts.package, from: opts.from, to: opts.to, statement: opts.statement, license: opts.license,
      pythonpath: list(opts.pythonpath), pytestArgs: list(opts.pytestArgs), testFiles: opts.testFiles ? list(opts.testFiles) : undefined, id: opts.id, into: opts.into,
    }, progress);
    print(`added ${id} to ${opts.into}`);
  }));
swe
  .command('validate')
  .description('validate every instance: the gold patch resolves it 3 times out of 3, and without it every fail-to-pass test fails')
  .option('--data <file>', 'instance set or SWE-bench JSONL', SHIPPED_SWE_SET)
  .option('--json', 'machine-readable')
  .action(action(async (opts: { data: string; json?: boolean }) => {
    const result = await sweValidate(opts.data, progress);
    if (opts.json) printJson(result);
    else print(`swe validate: ${result.valid}/${result.total} valid${result.refused.map((r) => `\n  ${r.instanceId}: ${r.reason}`).join('')}`);
    if (result.valid !== result.total) process.exitCode = 1;
  }));
swe
  .command('bench')
  .description('what episodes cost here: a sandboxed command, a fresh workspace, a scoring (benchmark figures, not a test)')
  .option('--data <file>', 'instance set or SWE-bench JSONL', SHIPPED_SWE_SET)
  .option('--commands <n>', 'sandboxed commands to time', positiveInt('--commands'), 50)
  .option('--json', 'machine-readable')
  .action(action(async (opts: { data: string; commands: number; json?: boolean }) => {
    const b = await sweBench(opts.data, opts.commands, progress);
    if (opts.json) return printJson(b);
    print(`swe bench, ${b.instances} instances:`);
    print(`  sandboxed command (true): mean ${b.command.meanMs.toFixed(1)} ms, p50 ${b.command.p50Ms.toFixed(1)} ms, p95 ${b.command.p95Ms.toFixed(1)} ms over ${b.command.runs}`);
    print(`  workspace (copy + give + remove): mean ${b.workspace.meanMs.toFixed(0)} ms, max ${b.workspace.maxMs} ms`);
    print(`  scoring the gold patch: mean ${b.scoring.meanSeconds.toFixed(2)} s, max ${b.scoring.maxSeconds.toFixed(2)} s (${b.scoring.maxInstance})`);
  }));
swe
  .command('replay')
  .description('every instance scored with its gold patch (must resolve) and with none (must not)')
  .option('--data <file>', 'instance set or SWE-bench JSONL', SHIPPED_SWE_SET)
  .option('--concurrency <n>', 'instances at once', positiveInt('--concurrency'), 2)
  .option('--json', 'print {"total":N,"passed":N,"instances":[...]}')
  .action(action(async (opts: { data: string; concurrency: number; json?: boolean }) => {
    const result = await sweReplay(opts.data, opts.concurrency, progress);
    if (opts.json) print(JSON.stringify(result));
    else {
      print(`swe replay: ${result.passed}/${result.total} passed`);
      for (const r of result.instances) print(`  ${r.instanceId.padEnd(36)} ${r.reason ?? 'ok'}  F2P ${r.failToPass}  P2P ${r.passToPass}  ${r.goldSeconds.toFixed(1)} s`);
    }
    if (result.passed !== result.total) process.exitCode = 1;
  }));

const appworld = program.command('appworld').description('AppWorld (the appworld package from PyPI) and its offline fixture world');
appworld
  .command('setup')
  .description('install appworld into a Python 3.11 venv and build the fixture world ($HARNESS_S_APPWORLD_HOME, default ~/.cache/harness-s/appworld; reused when there)')
  .option('--json', 'print the install: {"python","appworld","cache","fixtureRoot"}')
  .action(action(async (opts: { json?: boolean }) => {
    const { setupAppWorld } = await import('../infra/appworld/install');
    const started = Date.now();
    const installed = await setupAppWorld(progress);
    progress(`appworld ready in ${Math.round((Date.now() - started) / 1000)} s: fixture world ${installed.fixtureRoot}`);
    if (opts.json) printJson(installed);
    else print(`appworld: ${installed.appworld}\nAPPWORLD_CACHE: ${installed.cache}\nAPPWORLD_ROOT (fixture): ${installed.fixtureRoot}`);
  }));

program
  .command('eval')
  .description('evaluate an OpenAI-compatible endpoint under one harness; results stored in PostgreSQL')
  .requiredOption('--env <env>', 'dbbench | swe | appworld')
  .option('--data <file>', 'task file (dbbench, swe); for appworld: APPWORLD_ROOT (default: the fixture world)')
  .option('--dataset <name>', 'appworld: the dataset (data/datasets/<name>.txt)', 'fixture')
  .requiredOption('--harness <fileOrId>', 'a harness spec file, or a harness id of the env\'s pool (e.g. base)')
  .requiredOption('--base-url <url>', 'OpenAI-compatible endpoint, ending in /v1')
  .requiredOption('--model <name>', 'model name at that endpoint')
  .option('--api-key-env <name>', 'the environment variable that holds the endpoint\'s API key (none sent when unset)', 'OPENAI_API_KEY')
  .option('--limit <n>', 'first N tasks only', positiveInt('--limit'))
  .option('--tasks <ids>', 'only these task ids, comma-separated')
  .option('--concurrency <n>', 'episodes at once', positiveInt('--concurrency'), 4)
  .option('--max-turns <n>', 'rounds per episode', positiveInt('--max-turns'), 15)
  .option('--scoring <mode>', 'exact | normalized', 'exact')
  .option('--json', 'machine-readable')
  .action(action(async (opts: {
    env: string; data?: string; dataset: string; harness: string; baseUrl: string; model: string; apiKeyEnv: string;
    limit?: number; tasks?: string; concurrency: number; maxTurns: number; scoring: string; json?: boolean;
  }) => {
    const envOptions =
      opts.env === 'appworld' ? { root: opts.data, dataset: opts.dataset, servers: Math.min(opts.concurrency, 8) }
        : opts.env === 'dbbench' ? { data: opts.data, scoring: opts.scoring } : { data: opts.data };
    const envConfig = validateConfig({ env: { kind: opts.env, ...envOptions } }, 'eval options').env;
    const env = createEnvironment(envConfig);
    const harness = resolveHarness(env, opts.harness);
    await withStore(async (store) => {
      const result = await evaluate({
        evalId: newRunId(`eval-${opts.env}-${harness.id}`), env, envConfig, harness,
        baseUrl: opts.baseUrl, model: opts.model, apiKey: process.env[opts.apiKeyEnv] || NO_API_KEY, limit: opts.limit,
        taskIds: opts.tasks?.split(',').map((t) => t.trim()).filter(Boolean),
        concurrency: opts.concurrency, maxTurns: opts.maxTurns, temperature: 0, seed: 1, store, progress: !opts.json,
      });
      const table = evalTable(env, result);
      if (opts.json) return printJson({ evalId: result.evalId, harness: result.harness, model: result.model, total: result.total, passed: result.passed, byKind: result.byKind, failures: result.failures, ...table });
      print(evalTableText(result, table));
    }).finally(() => env.close?.());
  }));

program
  .command('compare')
  .description('ablation: run each arm on the same seeds and tasks, and print their figures side by side')
  .requiredOption('--config <file>', 'run config (or workflow input) every arm starts from')
  .option('--arms <list>', `comma-separated, of: ${Object.keys(COMPARE_ARMS).join(', ')}`, 'policy-only,harness-s,random-k')
  .option('--seeds <list>', 'comma-separated seeds', '1,2,3')
  .option('--steps <n>', "override the config's steps", positiveInt('--steps'))
  .option('--parallel <n>', 'runs at once', positiveInt('--parallel'), 3)
  .option('--world <file>', "sim configs: the world every arm runs on (the embedded sim cluster loads it too; with --attach, start your sim cluster with the same --world); default: the config's env.world, else the shipped world")
  .option('--pool <hash>', 'the frozen pool (from `harness-s pool evolve`) the harness-s-pool arm rescues with')
  .option('--attach', 'use the Temporal server and workers at $TEMPORAL_ADDRESS instead of starting the embedded stack')
  .option('--report <dir>', 'also write the compare report (curves per arm with seed bands, the difference CIs) to DIR/index.html')
  .option('--json', 'machine-readable: {"arms": {"<arm>": {...figures}}, "diffs": {"<arm> - <arm>": {"<figure>": {"mean", "lo", "hi", "excludesZero"}}}, ...}')
  .action(action(async (opts: { config: string; arms: string; seeds: string; steps?: number; parallel: number; world?: string; pool?: string; attach?: boolean; report?: string; json?: boolean }) => {
    const seeds = opts.seeds.split(',').map((v) => {
      const n = Number(v.trim());
      if (v.trim() === '' || !Number.isInteger(n) || n < 0) throw new UserError(`--seeds: '${v}' is not a whole number >= 0 (give e.g. --seeds 1,2,3)`);
      return n;
    });
    const arms = opts.arms.split(',').map((a) => a.trim()).filter(Boolean);
    const { raw } = readConfigFile(opts.config);
    const world = opts.world === undefined ? undefined : path.resolve(opts.world);
    const plan = planCompare(opts.steps ? { ...(raw as object), steps: opts.steps } : raw, arms, seeds, new Date(), world, opts.pool);
    progress(`compare: ${arms.length} arms x ${seeds.length} seeds = ${plan.length} runs, ${opts.parallel} at a time`);
    const simWorld = plan[0].config.env.kind === 'sim' ? plan[0].config.env.world : undefined;
    const stack = opts.attach ? null : await startEmbeddedStack({ logger: createLogger('harness-s', process.env.LOG_LEVEL ?? 'warn'), log: progress, world: simWorld });
    try {
      const result = await runCompare({ client: await connectClient(), plan, parallel: opts.parallel, progress });
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
  }));

const profiles = program.command('profiles').description("the router's behaviour profiles");
profiles
  .command('show <run>')
  .description('the sibling x task-kind rescue matrix (thin cells marked), its versions, and the router picks under each')
  .option('--version <n>', 'this profile version instead of the newest', positiveInt('--version'))
  .option('--json', 'machine-readable')
  .action(action(async (runId: string, opts: { version?: number; json?: boolean }) => {
    await withStore(async (store) => {
      const view = await profilesView(store, runId, opts.version);
      if (opts.json) return printJson(view);
      print(profilesText(view, (await store.getRun(runId))?.env === 'sim'));
    });
  }));

program
  .command('report <run>')
  .description('write a self-contained HTML page of a run\'s charts (inline SVG; viewing it needs no network)')
  .option('--out <dir>', 'directory for index.html (default .data/reports/<run>)')
  .action(action(async (runId: string, opts: { out?: string }) => {
    await withStore(async (store) => {
      print(await writeRunReport({ store, runId, dir: opts.out ?? defaultReportDir(runId) }));
    });
  }));

program
  .command('export <run>')
  .description("write a step's policy as a LoRA adapter folder (adapter_config.json, the weights, a manifest) and check it loads in the run's inference server")
  .requiredOption('--out <dir>', 'the folder to write (must not exist, or be empty)')
  .option('--step <n>', 'the trained step to export (default: the last)', nonNegativeInt('--step'))
  .option('--force', 'replace a folder that is not empty')
  .option('--no-check', 'skip loading it into the inference server')
  .option('--json', 'machine-readable: the folder, the manifest and the check')
  .action(action(async (runId: string, opts: { out: string; step?: number; force?: boolean; check: boolean; json?: boolean }) => {
    const result = await withStore((store) => exportRun(store, { runId, step: opts.step, outDir: opts.out, force: opts.force, check: opts.check }, progress));
    if (opts.json) printJson(result);
    else print(exportText(result));
  }));

const config = program.command('config').description('run configs');
config
  .command('schema')
  .description('the JSON Schema of a run config (for the Temporal UI and editors)')
  .option('--out <file>', 'write it to a file instead of stdout')
  .action(action(async (opts: { out?: string }) => {
    const schema = JSON.stringify(runConfigJsonSchema(), null, 2);
    if (opts.out) writeFileSync(opts.out, `${schema}\n`);
    else print(schema);
  }));
config
  .command('check <file>')
  .description('validate a run config file: every bad or unknown field is named, and every file it names must exist')
  .action(action(async (file: string) => {
    const { config: parsed } = readConfigFile(file);
    const missing = missingFiles(parsed);
    if (missing.length) throw new UserError(`${file}: ${missing.map((m) => `${m.path}: ${m.file} does not exist`).join('; ')} (paths are read by the workers, from their working directory)`);
    print(`${file}: valid (${parsed.env.kind}, ${parsed.steps} steps, B=${parsed.rollout.tasksPerStep}, G=${parsed.rollout.groupSize})`);
  }));

const pool = program.command('pool').description('sibling harness pools: evolve one from the base harness (Directional Harness Evolution), show, list');
pool
  .command('evolve')
  .description('evolve a sibling pool from the base harness and freeze it (workflow evolveHarnessPool; needs `harness-s dev` or workers)')
  .requiredOption('--config <file>', 'an evolution config JSON file (see examples/evolve-sim.json), or a workflow input {"config": {...}}')
  .option('--wait', 'wait for the frozen pool and print it')
  .option('--json', 'wait, then print {"pool", "siblings": [...]} as JSON')
  .action(action(async (opts: { config: string; wait?: boolean; json?: boolean }) => {
    const { raw, config: parsed } = readEvolutionConfigFile(opts.config);
    const missing = filesNamedBy(parsed).filter(({ file }) => !existsSync(file));
    if (parsed.base !== undefined && !existsSync(parsed.base)) missing.push({ path: 'base', file: parsed.base });
    if (missing.length) throw new UserError(`${opts.config}: ${missing.map((m) => `${m.path}: ${m.file} does not exist`).join('; ')}`);
    const { handle, attached } = await startEvolution(await connectClient(), raw, parsed);
    progress(`${attached ? 'attached to the running' : 'started'} evolution ${handle.workflowId}; Web UI ${uiUrlFor(temporalAddressFromEnv())}/namespaces/default/workflows/${encodeURIComponent(handle.workflowId)}`);
    if (!opts.wait && !opts.json) return print(handle.workflowId);
    const result = await handle.result();
    if (opts.json) printJson(evolutionJson(result));
    else print(`${evolutionText(result)}
${effectText(result.effect)}`);
  }));
pool
  .command('show <pool>')
  .description('a frozen pool (its hash, a unique prefix, or the evolution name): members, lineage tree, effect matrix with locality and complementarity')
  .action(action(async (ref: string) => {
    await withStore(async (store) => print(await poolShowText(store.evolutions, ref)));
  }));
pool
  .command('list')
  .option('--json', 'machine-readable')
  .action(action(async (opts: { json?: boolean }) => {
    const pools = await withStore((store) => poolList(store.evolutions));
    if (opts.json) return printJson(pools);
    if (pools.length === 0) return print('no frozen pools (evolve one with `harness-s pool evolve --config examples/evolve-sim.json --wait`)');
    for (const p of pools) print(`${p.pool}  ${p.env.padEnd(8)} ${String(p.evolution ?? '-').padEnd(20)} ${p.createdAt}  ${p.siblings.join(' ')}`);
  }));
pool
  .command('schema')
  .description('the JSON Schema of an evolution config')
  .option('--out <file>', 'write it to a file instead of stdout')
  .action(action(async (opts: { out?: string }) => {
    const schema = JSON.stringify(evolutionConfigJsonSchema(), null, 2);
    if (opts.out) writeFileSync(opts.out, `${schema}\n`);
    else print(schema);
  }));

/** The files a config names that this machine does not have. */
function missingFiles(config: RunConfig): Array<{ path: string; file: string }> {
  return filesNamedBy(config).filter(({ file }) => !existsSync(file));
}

program.parseAsync().catch((err) => {
  progress(`harness-s: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
