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
import { progress, print, printJson, action, withStore, positiveInt, nonNegativeInt } from './shared';

export function registerRunCommands(program: Command): void {
  const run = program.command('run').description('launch and operate runs');

  run
    .command('start')
    .requiredOption('--config <file>', 'a RunConfig JSON file, or a workflow input {"config": {...}}')
    .option('--name <name>', 'run name (overrides the config)')
    .option('--id <id>', 'run id (the workflow id); default <name>-<timestamp>')
    .option('--wait', 'wait for the run to finish and print its summary')
    .action(
      action(async (opts: { config: string; name?: string; id?: string; wait?: boolean }) => {
        const { raw } = readConfigFile(opts.config);
        const named = opts.name ? { ...(raw as object), name: opts.name } : raw;
        const parsed = validateConfig(named, opts.config);
        const client = await connectClient();
        const runId = opts.id ?? newRunId(parsed.name);
        const handle = await startRun(client, named, parsed, runId);
        progress(
          `started run ${runId}; Web UI ${uiUrlFor(temporalAddressFromEnv())}/namespaces/default/workflows/${encodeURIComponent(runId)}`,
        );
        print(runId);
        if (opts.wait) print(summaryText(await handle.result()));
      }),
    );

  run
    .command('status <id>')
    .option('--json', 'machine-readable')
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
        if (view.live) print([statusText(view.live), ...replicas].join('\n'));
        else if (view.summary) print([`${view.status}`, summaryText(view.summary), ...lineageLines(view)].join('\n'));
        else
          print(
            `run ${id}: ${view.status}${view.failure ? `: ${view.failure}` : ''}${view.status === 'RUNNING' ? '' : '\n(resume it with `harness-s run recover ' + id + '`)'}${['', ...lineageLines(view)].join('\n')}`,
          );
      }),
    );

  run
    .command('list')
    .option('--json', 'machine-readable')
    .option('--limit <n>', 'at most this many', positiveInt('--limit'), 50)
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
    .command('pause <id>')
    .option('--reason <text>', 'shown in status')
    .action(
      action(async (id: string, opts: { reason?: string }) => {
        await pauseRun(await connectClient(), id, opts.reason);
        print(`pause requested: ${id} stops before its next step`);
      }),
    );

  run.command('resume <id>').action(
    action(async (id: string) => {
      await resumeRun(await connectClient(), id);
      print(`resumed: ${id}`);
    }),
  );

  run
    .command('update <id> <change>')
    .description(
      `change safe settings of a running run, e.g. '{"steps": 40, "eval": {"every": 5}}' (safe: ${SAFE_CONFIG_FIELDS.join(', ')})`,
    )
    .action(
      action(async (id: string, change: string) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(change);
        } catch (err) {
          throw new UserError(`the change must be JSON such as '{"steps": 40}': ${(err as Error).message}`);
        }
        const result = await changeRunConfig(await connectClient(), id, parsed);
        print(`run ${id}: config changed from step ${result.fromStep} (steps ${result.config.steps})`);
      }),
    );

  run.command('cancel <id>').action(
    action(async (id: string) => {
      await cancelRun(await connectClient(), id);
      print(`cancel requested: ${id}`);
    }),
  );

  run
    .command('recover <id>')
    .description('continue a failed or terminated run in a new execution from its last completed step')
    .action(
      action(async (id: string) => {
        await withStore(async (store) => {
          const { resume, previousStatus } = await recoverRun(await connectClient(), store, id);
          print(
            resume
              ? `recovered ${id} (was ${previousStatus}): continues at step ${resume.nextStep} with policy ${resume.policyVersion}, profiles v${resume.profileVersion}`
              : `recovered ${id} (was ${previousStatus}): it had no profiles yet, so it starts over; stored rollouts are reused`,
          );
        });
      }),
    );

  run
    .command('fork <id>')
    .description(
      "start a new run from a run's training checkpoint at or before a step (its config plus safe changes, its profiles and pool)",
    )
    .requiredOption(
      '--from-step <n>',
      'the step whose checkpoint to start from (the newest at or before it)',
      nonNegativeInt('--from-step'),
    )
    .option('--config <changes.json>', `a JSON file of safe changes, e.g. {"steps": 40} (safe: ${SAFE_CONFIG_FIELDS.join(', ')})`)
    .option('--id <id>', 'the new run id; default <run>-fork<step>-<time>')
    .option('--json', 'machine-readable')
    .action(
      action(async (id: string, opts: { fromStep: number; config?: string; id?: string; json?: boolean }) => {
        const change = opts.config ? readJsonFile(opts.config) : undefined;
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
    .command('history <id>')
    .description('history sizes: events of the run execution and of each step child workflow')
    .option('--json', 'machine-readable')
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
    .command('watch <id>')
    .description('live progress per step until the run ends')
    .action(
      action(async (id: string) => {
        await watchRun(await connectClient(), id, print);
      }),
    );
}
