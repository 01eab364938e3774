/**
 * One training step at cluster scale, measured: a run of one step of
 * `--tasks` x G rollouts (2,048 x 8 = 16,384 by default) on the zero-latency
 * SIMULATED cluster (in process), a Temporal dev server of its own and the
 * run store ($DATABASE_URL), with the workers of infra/bench/stack.ts. It
 * prints the step's wall time, the events and bytes of every workflow's
 * history (the run, its profiling, the step, each slice), the largest payload
 * in any of them, and the trajectories stored against the rollouts planned.
 * Not part of `npm test`: it takes minutes.
 *
 *   npx tsx infra/bench/step-scale.ts [--tasks 2048] [--group-size 8] [--refill dynamic --max-draws 512] [--json]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { Command, InvalidArgumentError, Option } from 'commander';
import pino from 'pino';
import { writeScaledWorld } from '../../core/bench/in-process';
import { parseRunConfig, SAMPLING_REFILLS, type RunConfigInput } from '../../core/config';
import { loadSimWorld } from '../../core/envs/sim/world';
import { maxDraws } from '../../core/rl/batch-fill';
import type { StepSummary } from '../../core/rl/step-summary';
import { startBenchCluster } from './sim-latency';
import { startBenchStack } from './stack';
import { benchRunId, releaseRun, startBenchRun, waitUntilHeld } from './temporal-runs';

/** Temporal's default warning thresholds: events per history, and one payload's bytes. */
const EVENTS_WARNING = 10_240;
const PAYLOAD_WARNING_BYTES = 512 * 1024;

export interface HistoryFigures {
  workflowId: string;
  executions: number;
  events: number;
  /** The encoded history's size. */
  bytes: number;
  /** The largest Payloads (an input or a result) in it, and what carried it. */
  largestPayloadBytes: number;
  largestPayload: string;
  /** Whether a worker replayed it from the server (a query on the closed workflow), or why not. */
  replays?: string;
}

export interface StepScaleResult {
  simulated: true;
  runId: string;
  tasks: number;
  groupSize: number;
  refill: string;
  drawn: number;
  /** The step child's wall time, start to close, and its phases from the step summary. */
  stepSeconds: number;
  phaseSeconds: StepSummary['phaseSeconds'];
  runSeconds: number;
  slices: number;
  histories: HistoryFigures[];
  largestPayload: { workflowId: string; bytes: number; what: string };
  trajectoriesStored: number;
  rolloutsPlanned: number;
  batch: { groups: number; rollouts: number };
  trainer: { datums: number; responseTokens: number };
  machine: { cpus: number; node: string };
}

type Payloads = { payloads?: Array<{ data?: Uint8Array | null; metadata?: Record<string, Uint8Array> | null }> | null };

/** The bytes of a Payloads: its data and metadata. */
function payloadsBytes(p: Payloads): number {
  return (p.payloads ?? []).reduce(
    (n, one) => n + (one.data?.length ?? 0) + Object.entries(one.metadata ?? {}).reduce((m, [k, v]) => m + k.length + v.length, 0),
    0,
  );
}

/** Every Payloads under an event's attributes. */
function* payloadsIn(node: unknown): Generator<Payloads> {
  if (node === null || typeof node !== 'object' || node instanceof Uint8Array) return;
  if (Array.isArray((node as Payloads).payloads)) {
    yield node as Payloads;
    return;
  }
  for (const value of Object.values(node)) yield* payloadsIn(value);
}

function historyFigures(workflowId: string, histories: temporal.api.history.v1.IHistory[]): HistoryFigures {
  let largest = { bytes: 0, what: '' };
  let events = 0;
  let bytes = 0;
  for (const history of histories) {
    bytes += temporal.api.history.v1.History.encode(history).finish().length;
    const labels = new Map<string, string>();
    for (const event of history.events ?? []) {
      events += 1;
      const type = temporal.api.enums.v1.EventType[event.eventType ?? 0].replace(/^EVENT_TYPE_/, '');
      const scheduled = event.activityTaskScheduledEventAttributes?.activityType?.name;
      if (scheduled) labels.set(String(event.eventId), scheduled);
      const of = event.activityTaskCompletedEventAttributes?.scheduledEventId ?? event.activityTaskFailedEventAttributes?.scheduledEventId;
      const child =
        event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowType?.name ??
        event.childWorkflowExecutionCompletedEventAttributes?.workflowType?.name;
      const what = `${type}${scheduled ? ` ${scheduled}` : ''}${of !== undefined && of !== null ? ` ${labels.get(String(of)) ?? ''}` : ''}${child ? ` ${child}` : ''}`;
      for (const p of payloadsIn(event)) {
        const size = payloadsBytes(p);
        if (size > largest.bytes) largest = { bytes: size, what };
      }
    }
  }
  return { workflowId, executions: histories.length, events, bytes, largestPayloadBytes: largest.bytes, largestPayload: largest.what };
}

/** Events per page when the bench reads a history: a page of a large step's history may pass gRPC's 4 MB message limit. */
const HISTORY_PAGE_EVENTS = 50;

/** One execution's history, read in small pages. */
async function fetchHistory(client: Client, workflowId: string, runId: string): Promise<temporal.api.history.v1.IHistory> {
  const events: temporal.api.history.v1.IHistoryEvent[] = [];
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await client.workflowService.getWorkflowExecutionHistory({
      namespace: client.options.namespace,
      execution: { workflowId, runId },
      maximumPageSize: HISTORY_PAGE_EVENTS,
      nextPageToken,
    });
    events.push(...(page.history?.events ?? []));
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return { events };
}

/** The histories of every execution of a workflow id (continue-as-new makes several); none when it does not exist. */
async function historiesOf(client: Client, workflowId: string): Promise<temporal.api.history.v1.IHistory[]> {
  let latest: string;
  try {
    latest = (await client.workflow.getHandle(workflowId).describe()).runId;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return [];
    throw err;
  }
  const executions: string[] = [];
  for await (const e of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) executions.push(e.runId);
  if (!executions.includes(latest)) executions.push(latest); // visibility may lag behind
  return Promise.all(executions.map((runId) => fetchHistory(client, workflowId, runId)));
}

/**
 * Whether a worker can replay the workflow from the server's history: a query on a closed workflow is
 * answered by a worker that fetches the whole history and replays it (as after a worker restart).
 */
async function replaysFromServer(client: Client, workflowId: string): Promise<string> {
  try {
    await client.workflow.getHandle(workflowId).query('__temporal_workflow_metadata');
    return 'yes';
  } catch (err) {
    return `no: ${(err as Error).message}`;
  }
}

export async function benchStepScale(options: {
  tasks: number;
  groupSize: number;
  refill: (typeof SAMPLING_REFILLS)[number];
  maxDraws?: number;
  log: (line: string) => void;
}): Promise<StepScaleResult> {
  const { log, tasks, groupSize } = options;
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-step-scale-'));
  const stack = await startBenchStack({ logger, log });
  try {
    const sampling =
      options.refill === 'none'
        ? {}
        : { sampling: { refill: options.refill, ...(options.maxDraws !== undefined ? { maxDraws: options.maxDraws } : {}) } };
    const draws = maxDraws(options.refill === 'none' ? undefined : { refill: options.refill, maxDraws: options.maxDraws }, tasks);
    const worldFile = path.join(dataDir, 'world-step-scale.json');
    const world = writeScaledWorld(loadSimWorld(), draws, 0.2, worldFile);
    const cluster = await startBenchCluster({ world, dataDir, logger });
    log(`[SIMULATED] zero-latency sim cluster at ${cluster.url} (world with ${world.kinds.map((k) => k.tasks).join('/')} tasks per kind)`);
    try {
      const raw: RunConfigInput = {
        name: `step-scale-${tasks}x${groupSize}`,
        env: { kind: 'sim', world: worldFile },
        steps: 1,
        seed: 7,
        policy: { baseUrl: `${cluster.url}/v1` },
        trainer: { baseUrl: cluster.url, pollSeconds: 0.02 },
        rollout: { tasksPerStep: tasks, groupSize, maxTurns: 5, concurrency: 8 },
        rescue: { enabled: true, k: 2 },
        router: { probeTasksPerKind: 1, probeRollouts: 2, reanchorEvery: 0 },
        eval: { enabled: false, heldOut: 0.2 },
        ...sampling,
      };
      // The config schema refuses a step past the largest tested: the bench measures only what a user may run.
      const config = parseRunConfig(raw, 'step-scale config');
      const runId = benchRunId(`step-${tasks * groupSize}`);
      const started = Date.now();
      log(
        `run ${runId}: 1 step of ${tasks} tasks x G=${groupSize}${options.refill === 'none' ? '' : `, refill ${options.refill} up to ${draws} tasks`}; profiling first`,
      );
      const handle = await startBenchRun(stack.client, runId, raw, config, true);
      const result = handle.result();
      result.catch(() => undefined);
      await waitUntilHeld(handle, result);
      await releaseRun(handle);
      log(`run ${runId}: step 0 released (Web UI ${stack.uiUrl})`);
      await result;
      const runSeconds = (Date.now() - started) / 1000;

      const stepId = `${runId}/step-0`;
      const stepDescription = await stack.client.workflow.getHandle(stepId).describe();
      const stepSeconds = (stepDescription.closeTime!.getTime() - stepDescription.startTime.getTime()) / 1000;
      const ids = [runId, `${runId}/profiles-v1`, stepId];
      for (let slice = 0; ; slice++) {
        const id = `${stepId}/slice-${slice}`;
        const histories = await historiesOf(stack.client, id);
        if (histories.length === 0) break;
        ids.push(id);
      }
      const histories: HistoryFigures[] = [];
      for (const id of ids)
        histories.push({ ...historyFigures(id, await historiesOf(stack.client, id)), replays: await replaysFromServer(stack.client, id) });
      const top = histories.reduce((a, b) => (b.largestPayloadBytes > a.largestPayloadBytes ? b : a));

      const [{ summary }] = await stack.store.steps(runId);
      const rescues = (await stack.store.routingDecisions(runId)).filter((d) => d.step === 0 && d.chosen.length > 0).length;
      const drawn = summary.sampling?.drawn ?? summary.tasks;
      const rolloutsPlanned = (drawn + rescues) * groupSize;
      const trajectoriesStored = await stack.store.countTrajectories(runId);
      const batch = await stack.store.trainingBatches.groups(runId, stepId, drawn + 1);
      const trainer = await stack.store.trainerStep(runId, 0);
      if (trajectoriesStored !== rolloutsPlanned)
        throw new Error(`run ${runId}: ${trajectoriesStored} trajectories stored, ${rolloutsPlanned} planned`);
      return {
        simulated: true,
        runId,
        tasks,
        groupSize,
        refill: options.refill,
        drawn,
        stepSeconds,
        phaseSeconds: summary.phaseSeconds,
        runSeconds,
        slices: ids.length - 3,
        histories,
        largestPayload: { workflowId: top.workflowId, bytes: top.largestPayloadBytes, what: top.largestPayload },
        trajectoriesStored,
        rolloutsPlanned,
        batch: { groups: batch.length, rollouts: batch.reduce((n, g) => n + g.rollouts.length, 0) },
        trainer: { datums: trainer?.datums ?? 0, responseTokens: trainer?.responseTokens ?? 0 },
        machine: { cpus: os.cpus().length, node: process.versions.node },
      };
    } finally {
      await cluster.close().catch(() => undefined);
    }
  } finally {
    await stack.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export function stepScaleText(r: StepScaleResult): string {
  const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;
  const lines = [
    `[SIMULATED] one step of ${r.tasks} tasks x G=${r.groupSize} (${r.tasks * r.groupSize} base rollouts)${r.refill === 'none' ? '' : `, refill ${r.refill}: ${r.drawn} tasks drawn`}, run ${r.runId}`,
    `step wall time ${r.stepSeconds.toFixed(1)} s (rollouts ${r.phaseSeconds?.rollout.toFixed(1)} s, train ${r.phaseSeconds?.train.toFixed(1)} s, publish ${r.phaseSeconds?.publish.toFixed(1)} s); whole run ${r.runSeconds.toFixed(1)} s with its profiling`,
    `slices: ${r.slices}`,
    '',
    '| workflow | events | history | largest payload | carried by | replays from the server |',
    '|---|---|---|---|---|---|',
    ...r.histories.map(
      (h) =>
        `| ${h.workflowId} | ${h.events}${h.events > EVENTS_WARNING ? ' (over the 10k warning)' : ''} | ${kb(h.bytes)} | ` +
        `${kb(h.largestPayloadBytes)}${h.largestPayloadBytes > PAYLOAD_WARNING_BYTES ? ' (over the 512 KB warning)' : ''} | ${h.largestPayload} | ${h.replays ?? ''} |`,
    ),
    '',
    `largest payload in any history: ${kb(r.largestPayload.bytes)} (${r.largestPayload.what}, ${r.largestPayload.workflowId})`,
    `trajectories stored ${r.trajectoriesStored}, rollouts planned ${r.rolloutsPlanned}`,
    `batch read by the trainer: ${r.batch.groups} groups, ${r.batch.rollouts} rollouts; ${r.trainer.datums} datums trained (non-zero advantage), ${r.trainer.responseTokens} response tokens`,
    `machine: ${r.machine.cpus} CPUs, Node ${r.machine.node}`,
  ];
  return `${lines.join('\n')}\n`;
}

function positive(name: string) {
  return (text: string) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${name} takes a positive whole number`);
    return n;
  };
}

if (require.main === module) {
  const program = new Command('step-scale')
    .option('--tasks <n>', 'tasks in the step (rollout.tasksPerStep)', positive('--tasks'), 2048)
    .option('--group-size <n>', 'G (rollout.groupSize)', positive('--group-size'), 8)
    .addOption(new Option('--refill <how>', 'sampling.refill').choices([...SAMPLING_REFILLS]).default('none'))
    .option('--max-draws <n>', 'sampling.maxDraws (with a refill)', positive('--max-draws'))
    .option('--json', 'print the figures as JSON')
    .parse();
  const opts = program.opts<{
    tasks: number;
    groupSize: number;
    refill: (typeof SAMPLING_REFILLS)[number];
    maxDraws?: number;
    json?: boolean;
  }>();
  benchStepScale({ ...opts, log: (line) => process.stderr.write(`${line}\n`) }).then(
    (result) => process.stdout.write(opts.json ? `${JSON.stringify(result, null, 2)}\n` : stepScaleText(result)),
    (err: Error) => {
      process.stderr.write(`step-scale: ${err.message}\n`);
      process.exit(1);
    },
  );
}
