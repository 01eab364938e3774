/**
 * The bench's runs on Temporal: started (optionally held before step 0, so a
 * measurement starts after the run's profiling), watched until their last
 * step ends, and their histories counted.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { RunConfig } from '../../core/config';
import {
  pauseSignal,
  resumeSignal,
  SEARCH_ATTRIBUTES,
  statusQuery,
  TASK_QUEUES,
  type RunInput,
  type RunSummary,
} from '../../workflows/definitions';
import type { RunHistory } from '../../core/bench/figures';
import { isSimulatedEnv } from '../../core/sim-kind';

type HarnessSRun = (input: RunInput) => Promise<RunSummary>;
export type RunHandle = WorkflowHandle<HarnessSRun>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A run id of the bench: `bench-<what>-<time>`. */
export function benchRunId(what: string): string {
  return `bench-${what}-${Date.now().toString(36)}${Math.floor(Math.random() * 1296).toString(36)}`;
}

/**
 * Starts `harnessSRun` (as `harness-s run start` does); with `held`, paused
 * from its start with signal-with-start, so it prepares and profiles, then
 * waits before step 0 until `releaseRun`.
 */
export async function startBenchRun(client: Client, runId: string, raw: unknown, config: RunConfig, held: boolean): Promise<RunHandle> {
  const options = {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: raw as RunInput['config'] }] as [RunInput],
    typedSearchAttributes: [
      { key: SEARCH_ATTRIBUTES.runName, value: config.name },
      { key: SEARCH_ATTRIBUTES.env, value: config.env.kind },
    ],
    staticSummary: `Harness-S run ${config.name} (bench, ${config.env.kind}${isSimulatedEnv(config.env.kind) ? ', SIMULATED' : ''})`,
  };
  if (!held) return client.workflow.start<HarnessSRun>('harnessSRun', options);
  await client.workflow.signalWithStart<HarnessSRun, [{ reason?: string }?]>('harnessSRun', {
    ...options,
    signal: pauseSignal,
    signalArgs: [{ reason: 'bench: held before step 0 until the measurement starts' }],
  });
  return client.workflow.getHandle<HarnessSRun>(runId);
}

/** Whether a promise has settled, without waiting for it. */
function watch<T>(promise: Promise<T>): { settled: () => boolean; promise: Promise<T> } {
  let done = false;
  const watched = promise.finally(() => (done = true));
  watched.catch(() => undefined);
  return { settled: () => done, promise: watched };
}

/** Waits until the held run is paused before step 0 (its profiling done); a run that ends first is an error. */
export async function waitUntilHeld(handle: RunHandle, result: Promise<RunSummary>): Promise<void> {
  const run = watch(result);
  for (;;) {
    const status = await handle.query(statusQuery).catch(() => null);
    if (status && status.phase === 'training' && status.paused && status.step === 0) return;
    if (run.settled()) {
      await run.promise;
      throw new Error(`bench run ${handle.workflowId} ended before its first step`);
    }
    await sleep(100);
  }
}

export async function releaseRun(handle: RunHandle): Promise<void> {
  await handle.signal(resumeSignal);
}

/**
 * Waits, polling every 50 ms, until step `step`'s child has closed, so what is
 * read right after belongs to the run's steps; stops early if the run ends.
 */
export async function waitForStepClosed(client: Client, runId: string, step: number, result: Promise<RunSummary>): Promise<void> {
  const run = watch(result);
  const child = client.workflow.getHandle(`${runId}/step-${step}`);
  for (;;) {
    const description = await child.describe().catch(() => null);
    if (description && description.status.name !== 'RUNNING') return;
    if (run.settled()) return;
    await sleep(50);
  }
}

/** Wall seconds from step 0's start to the end of step `steps - 1`, by Temporal's timestamps of the step children. */
export async function stepsWallSeconds(client: Client, runId: string, steps: number): Promise<number> {
  const first = await client.workflow.getHandle(`${runId}/step-0`).describe();
  const last = await client.workflow.getHandle(`${runId}/step-${steps - 1}`).describe();
  if (!last.closeTime) throw new Error(`bench run ${runId}: step ${steps - 1} has not ended`);
  return (last.closeTime.getTime() - first.startTime.getTime()) / 1000;
}

const eventsOf = async (client: Client, workflowId: string, runId?: string) =>
  (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events?.length ?? 0;

/**
 * Events of every execution of the run id (continue-as-new makes several) and
 * of each step child `<runId>/step-<n>`.
 */
export async function runHistory(client: Client, label: string, runId: string, steps: number): Promise<RunHistory> {
  const executions: string[] = [];
  // Visibility may lag a moment behind a run that has just ended.
  for (let tries = 0; tries < 50; tries++) {
    executions.length = 0;
    for await (const e of client.workflow.list({ query: `WorkflowId = '${runId}'` })) executions.push(e.runId);
    const closed = await client.workflow.getHandle(runId).describe();
    if (executions.includes(closed.runId)) break;
    await sleep(100);
  }
  let runEvents = 0;
  for (const execution of executions) runEvents += await eventsOf(client, runId, execution);
  const stepEvents: number[] = [];
  for (let step = 0; step < steps; step++) stepEvents.push(await eventsOf(client, `${runId}/step-${step}`));
  return { label, runId, executions: executions.length, runEvents, stepEvents };
}
