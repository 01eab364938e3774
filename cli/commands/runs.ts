/** `harness-s` run ...: launch and operate runs. */
import type { Command } from 'commander';
import { SAFE_CONFIG_FIELDS } from '../../core/config-change';
import { uiUrlFor } from '../../infra/temporal-dev-server';
import { temporalAddressFromEnv } from '../../workers/temporal-env';
import { lineageLines, statusText, summaryText } from '../report';
import {
  cancelRun,
  changeRunConfig,
  connectClient,
  forkRun,
  historyStats,
  listRuns,
  newRunId,
  pauseRun,
  readConfigFile,
  readJsonFile,
  recoverRun,
  resumeRun,
  runView,
  startRun,
  UserError,
  validateConfig,
} from '../runs';
import { watchRun } from '../watch';
import { nextStepAdvice } from '../run-advice';
import { progress, print, printJson, action, withStore, positiveInt, nonNegativeInt, examplesText } from './shared';

export function registerRunCommands(program: Command): void {
  const run = program
    .command('run')
    .description('launch and operate runs; <run> is a run id (the workflow id) as `run start` prints it and `run list` lists them')
    .addHelpText(
      'after',
      examplesText('run start --config examples/sim-quickstart.json', 'run list', 'run status <run>', 'run watch <run>'),
    );

  run
    .command('start')
    .description('start a training run (workflow harnessSRun) on the Temporal server at $TEMPORAL_ADDRESS; prints its run id')
    .requiredOption('--config <file>', 'a run config JSON file, or a workflow input {"config": {...}}')
    .option('--name <name>', 'run name (overrides the config)')
    .option('--id <run>', 'run id (the workflow id); default <name>-<timestamp>')
    .option('--wait', 'wait for the run to finish and print its summary')
    .option('--json', 'print {"runId"} (with --wait: {"runId", "summary"})')
    .addHelpText(
      'after',
      examplesText(
        'run start --config examples/sim-quickstart.json',
        'run start --config examples/sim-transfer.json --name transfer --wait',
        'run start --config examples/real-cpu.json --id cpu-1 --json',
      ),
    )
    .action(
      action(async (opts: { config: string; name?: string; id?: string; wait?: boolean; json?: boolean }) => {
        const { raw } = readConfigFile(opts.config);
        const named = opts.name ? { ...(raw as object), name: opts.name } : raw;
        const parsed = validateConfig(named, opts.config);
        const client = await connectClient();
        const runId = opts.id ?? newRunId(parsed.name);
        const handle = await startRun(client, named, parsed, runId);
        progress(
          `started run ${runId}; Web UI ${uiUrlFor(temporalAddressFromEnv())}/namespaces/default/workflows/${encodeURIComponent(runId)}`,
        );
        const summary = opts.wait ? await handle.result() : undefined;
        if (opts.json) return printJson({ runId, ...(summary ? { summary } : {}) });
        print(runId);
        if (summary) print(summaryText(summary));
      }),
    );

  run
    .command('status <run>')
    .description("a run's status: live progress while it runs, its summary once it completed, and what to do next when it stopped")
    .option('--json', 'machine-readable')
    .addHelpText('after', examplesText('run status <run>', 'run status <run> --json'))
    .action(
      action(async (id: string, opts: { json?: boolean }) => {
        const client = await connectClient();
        // Restores and a fork's parent come from the run store once the run has ended; without it, from the live status.
        const view = await withStore((store) => runView(client, id, store)).catch((err: unknown) => {
          if (err instanceof UserError) throw err;
          progress(`run store unreachable (${(err as Error).message}); showing what Temporal holds`);
          return runView(client, id);
        });
        if (opts.json) return printJson(view);
        const replicas = (view.replicaVersions ?? []).map(
          (r) =>
            `  run store: replica ${r.replica} ${r.state === 'ready' ? `serves ${r.policyVersion}` : `${r.state} for ${r.policyVersion}${r.reason ? ` (${r.reason})` : ''}`}`,
        );
        const advice = nextStepAdvice(view);
        const next = advice ? [`(${advice})`] : [];
        if (view.live) print([statusText(view.live), ...replicas, ...next].join('\n'));
        else if (view.summary) print([`${view.status}`, summaryText(view.summary), ...lineageLines(view)].join('\n'));
        else print([`run ${id}: ${view.status}${view.failure ? `: ${view.failure}` : ''}`, ...next, ...lineageLines(view)].join('\n'));
      }),
    );

  run
    .command('list')
    .description('the runs on the Temporal server, newest first: id, status, env, step, base-harness success, start time')
    .option('--json', 'machine-readable')
    .option('--limit <n>', 'at most this many', positiveInt('--limit'), 50)
    .addHelpText('after', examplesText('run list', 'run list --limit 10 --json'))
    .action(
      action(async (opts: { json?: boolean; limit: number }) => {
        const runs = await listRuns(await connectClient(), opts.limit);
        if (opts.json) return printJson(runs);
        if (runs.length === 0) return print('no runs');
        for (const r of runs) {
          print(
            `${r.runId.padEnd(44)} ${r.status.padEnd(11)} ${String(r.env ?? '-').padEnd(5)} step ${String(r.step ?? '-').padStart(3)}  base ${r.baseSuccess === null ? '-' : `${(r.baseSuccess * 100).toFixed(1)}%`}  ${r.startTime}`,
          );
        }
      }),
    );

  run
    .command('pause <run>')
    .description('pause a running run before its next step (signal pause); `run resume` continues it')
    .option('--reason <text>', 'shown in status')
    .option('--json', 'print {"runId", "requested": "pause", "reason"}')
    .addHelpText('after', examplesText('run pause <run> --reason "look at step 12"'))
    .action(
      action(async (id: string, opts: { reason?: string; json?: boolean }) => {
        await pauseRun(await connectClient(), id, opts.reason);
        if (opts.json) return printJson({ runId: id, requested: 'pause', reason: opts.reason ?? null });
        print(`pause requested: ${id} stops before its next step`);
      }),
    );

  run
    .command('resume <run>')
    .description('continue a run paused by `run pause` (or by the run itself: health.pause, checkpoint.onLoss)')
    .option('--json', 'print {"runId", "requested": "resume"}')
    .addHelpText('after', examplesText('run resume <run>'))
    .action(
      action(async (id: string, opts: { json?: boolean }) => {
        await resumeRun(await connectClient(), id);
        if (opts.json) return printJson({ runId: id, requested: 'resume' });
        print(`resumed: ${id}`);
      }),
    );

  run
    .command('update <run> [change]')
    .description(`change safe settings of a running run, from inline JSON or a --changes file (safe: ${SAFE_CONFIG_FIELDS.join(', ')})`)
    .option('--changes <file>', 'a JSON file of safe changes, instead of the inline [change]')
    .option('--json', 'print {"runId", "fromStep", "config"}')
    .addHelpText('after', examplesText(`run update <run> '{"steps": 40, "eval": {"every": 5}}'`, 'run update <run> --changes changes.json'))
    .action(
      action(async (id: string, change: string | undefined, opts: { changes?: string; json?: boolean }) => {
        if (change !== undefined && opts.changes !== undefined)
          throw new UserError('run update: give the change inline or as --changes <file>, not both');
        if (change === undefined && opts.changes === undefined)
          throw new UserError(`run update: give the change, inline (e.g. '{"steps": 40}') or as --changes <file>`);
        let parsed: unknown;
        if (opts.changes !== undefined) parsed = readJsonFile(opts.changes);
        else
          try {
            parsed = JSON.parse(change!);
          } catch (err) {
            throw new UserError(`the change must be JSON such as '{"steps": 40}': ${(err as Error).message}`);
          }
        const result = await changeRunConfig(await connectClient(), id, parsed);
        if (opts.json) return printJson({ runId: id, fromStep: result.fromStep, config: result.config });
        print(`run ${id}: config changed from step ${result.fromStep} (steps ${result.config.steps})`);
      }),
    );

  run
    .command('cancel <run>')
    .description('cancel a run (a Temporal cancellation request); `run recover` can continue it later from its last completed step')
    .option('--json', 'print {"runId", "requested": "cancel"}')
    .addHelpText('after', examplesText('run cancel <run>'))
    .action(
      action(async (id: string, opts: { json?: boolean }) => {
        await cancelRun(await connectClient(), id);
        if (opts.json) return printJson({ runId: id, requested: 'cancel' });
        print(`cancel requested: ${id}`);
      }),
    );

  run
    .command('recover <run>')
    .description('continue a failed, terminated, timed-out or cancelled run in a new execution from its last completed step')
    .option('--json', 'print {"runId", "previousStatus", "resume"} (resume: null when it starts over)')
    .addHelpText('after', examplesText('run recover <run>'))
    .action(
      action(async (id: string, opts: { json?: boolean }) => {
        await withStore(async (store) => {
          const { resume, previousStatus } = await recoverRun(await connectClient(), store, id);
          if (opts.json) return printJson({ runId: id, previousStatus, resume: resume ?? null });
          print(
            resume
              ? `recovered ${id} (was ${previousStatus}): continues at step ${resume.nextStep} with policy ${resume.policyVersion}, profiles v${resume.profileVersion}`
              : `recovered ${id} (was ${previousStatus}): it had no profiles yet, so it starts over; stored rollouts are reused`,
          );
        });
      }),
    );

  run
    .command('fork <run>')
    .description(
      "start a new run from a run's training checkpoint at or before a step (its config plus safe changes, its profiles and pool)",
    )
    .requiredOption(
      '--from-step <n>',
      'the step whose checkpoint to start from (the newest at or before it)',
      nonNegativeInt('--from-step'),
    )
    .option('--changes <file>', `a JSON file of safe changes, e.g. {"steps": 40} (safe: ${SAFE_CONFIG_FIELDS.join(', ')})`)
    .option('--id <run>', 'the new run id; default <run>-fork<step>-<time>')
    .option('--json', 'machine-readable')
    .addHelpText(
      'after',
      examplesText('run fork <run> --from-step 10', 'run fork <run> --from-step 10 --changes changes.json --id <new run>'),
    )
    .action(
      action(async (id: string, opts: { fromStep: number; changes?: string; id?: string; json?: boolean }) => {
        const change = opts.changes ? readJsonFile(opts.changes) : undefined;
        const forked = await withStore(async (store) =>
          forkRun(await connectClient(), store, { parentRunId: id, fromStep: opts.fromStep, change, runId: opts.id }),
        );
        if (opts.json) return printJson({ runId: forked.runId, parent: { runId: id, step: forked.checkpointStep }, resume: forked.resume });
        progress(
          `forked ${id} at its checkpoint of step ${forked.checkpointStep}: the new run starts at step ${forked.resume.nextStep} of ${forked.config.steps}`,
        );
        print(forked.runId);
      }),
    );

  run
    .command('history <run>')
    .description('history sizes: events of the run execution and of each step child workflow')
    .option('--json', 'machine-readable')
    .addHelpText('after', examplesText('run history <run>', 'run history <run> --json'))
    .action(
      action(async (id: string, opts: { json?: boolean }) => {
        const client = await connectClient();
        const view = await runView(client, id);
        const steps = view.summary?.stepsCompleted ?? view.live?.step ?? 0;
        const stats = await historyStats(client, id, steps);
        if (opts.json) return printJson(stats);
        print(
          `run ${id}: ${stats.runEvents} events in the current execution; ${stats.meanEventsPerStep.toFixed(1)} events per step child on average`,
        );
        for (const s of stats.steps) print(`  step ${String(s.step).padStart(3)}: ${s.events} events`);
      }),
    );

  run
    .command('watch <run>')
    .description('live progress per step until the run ends; exits 1 when it ends without completing')
    .option('--json', 'progress to stderr, then the final status as in `run status --json`')
    .addHelpText('after', examplesText('run watch <run>', 'run watch <run> --json > final.json'))
    .action(
      action(async (id: string, opts: { json?: boolean }) => {
        const final = await watchRun(await connectClient(), id, opts.json ? progress : print);
        if (opts.json) printJson(final);
      }),
    );
}
