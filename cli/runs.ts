/**
 * Run operations through the Temporal client: what `harness-s run ...` does,
 * usable from SDK scripts too.
 */
import { readFileSync } from 'node:fs';
import {
  Client,
  Connection,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  type WorkflowExecutionDescription,
} from '@temporalio/client';
import { parseRunConfig, parseStoredRunConfig, type RunConfig } from '../core/config';
import { applyConfigChange } from '../core/config-change';
import { runInputProblem, withoutSchemaKey } from '../core/run-input';
import { RunStore } from '../core/store/run-store';
import { runLineage } from '../core/run-lineage';
import { upgradeRunSummary } from '../core/report/run-summary';
import { namespaceFromEnv, temporalAddressFromEnv } from '../workers/temporal-env';
import { harnessSRun } from '../workflows';
import {
  pauseSignal,
  resumeSignal,
  SEARCH_ATTRIBUTES,
  statusQuery,
  TASK_QUEUES,
  updateConfigUpdate,
  type ConfigUpdateResult,
  type ParentRun,
  type RestoreEvent,
  type ResumePoint,
  type RunInput,
  type RunStatus,
  type RunSummary,
} from '../workflows/definitions';
import { UserError } from '../core/errors';
import { isSimulatedEnv } from '../core/sim-kind';

/** The CLI's user errors are core's: any of them exits 2 with its message alone. */
export { UserError };

/** A failed run's message as the user needs it: the innermost cause (the activity's own error), not "workflow failed". */
export function rootCauseMessage(err: unknown): string {
  let current = err as (Error & { cause?: unknown }) | undefined;
  while (current?.cause instanceof Error) current = current.cause as Error & { cause?: unknown };
  return current?.message ?? String(err);
}

export async function connectClient(): Promise<Client> {
  const address = temporalAddressFromEnv();
  try {
    const connection = await Connection.connect({ address, connectTimeout: 3000 });
    return new Client({ connection, namespace: namespaceFromEnv() });
  } catch (err) {
    throw new UserError(
      `cannot reach Temporal at ${address}: ${(err as Error).message}\n` +
        'Fix: run `npx harness-s dev` in another terminal, or set TEMPORAL_ADDRESS.',
    );
  }
}

/** A JSON file a user named; a file that is missing or not JSON is refused saying which. */
export function readJsonFile(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new UserError(`${file}: cannot read it as JSON: ${(err as Error).message}`);
  }
}

/** Reads a run config file: either a RunConfig or a workflow input `{ "config": {...} }`. */
export function readConfigFile(file: string): { raw: unknown; config: RunConfig } {
  const json = withoutSchemaKey(readJsonFile(file));
  // A file holds either a config or a whole workflow input {"config": {...}} (as the Web UI takes it).
  const isInput = json !== null && typeof json === 'object' && 'config' in json;
  const inputProblem = isInput ? runInputProblem(json) : null;
  if (inputProblem) throw new UserError(`${file} is invalid: ${inputProblem}`);
  const raw = isInput ? (json as RunInput).config : json;
  return { raw, config: validateConfig(raw, file) };
}

export function validateConfig(raw: unknown, source: string): RunConfig {
  try {
    return parseRunConfig(raw, source);
  } catch (err) {
    throw new UserError((err as Error).message);
  }
}

export function newRunId(name: string, now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
  return `${name}-${stamp}`;
}

export async function startRun(
  client: Client,
  raw: unknown,
  config: RunConfig,
  runId: string,
  recovery?: { resume?: ResumePoint; fork?: ParentRun },
) {
  const input: RunInput = recovery?.fork
    ? { config: raw as RunInput['config'], resume: recovery.resume, fork: recovery.fork }
    : recovery
      ? { config: raw as RunInput['config'], recover: true, ...(recovery.resume ? { resume: recovery.resume } : {}) }
      : { config: raw as RunInput['config'] };
  return client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [input],
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    typedSearchAttributes: [
      { key: SEARCH_ATTRIBUTES.runName, value: config.name },
      { key: SEARCH_ATTRIBUTES.env, value: config.env.kind },
      ...(recovery?.fork ? [{ key: SEARCH_ATTRIBUTES.parentRun, value: recovery.fork.runId }] : []),
    ],
    staticSummary: `Harness-S run ${config.name} (${config.env.kind}${isSimulatedEnv(config.env.kind) ? ', SIMULATED' : ''})`,
  });
}

export async function describeRun(client: Client, runId: string): Promise<WorkflowExecutionDescription> {
  try {
    return await client.workflow.getHandle(runId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new UserError(`no run with id ${runId} (see \`harness-s run list\`)`);
    throw err;
  }
}

export interface RunView {
  runId: string;
  status: string;
  /** Live status from the workflow while it runs. */
  live: RunStatus | null;
  /** The run's result once it completed. */
  summary: RunSummary | null;
  failure: string | null;
  /** Restores of the trainer model after the trainer lost it, oldest first. */
  restores: RestoreEvent[];
  /** A fork's parent run and the step it started from; null for a run started anew. */
  parent: ParentRun | null;
  /** The run's newest version on each inference replica, as the run store records it (absent without the store). */
  replicaVersions?: Array<{
    replica: string;
    policyVersion: string;
    state: string;
    reason: string | null;
    probeMeanAbsDiff: number | null;
  }>;
}

export async function runView(client: Client, runId: string, store?: RunStore): Promise<RunView> {
  const description = await describeRun(client, runId);
  const handle = client.workflow.getHandle(runId);
  const status = description.status.name;
  const lineage = store ? await runLineage(store, runId) : { restores: [], parent: null };
  const replicaVersions = store
    ? (await store.replicas.ofRun(runId)).map((r) => ({
        replica: r.replica,
        policyVersion: r.policyVersion,
        state: r.state,
        reason: r.reason,
        probeMeanAbsDiff: r.probeMeanAbsDiff,
      }))
    : undefined;
  const stored = { ...lineage, ...(replicaVersions ? { replicaVersions } : {}) };
  if (status === 'RUNNING') {
    const live = await handle.query(statusQuery);
    // Executions started before restores existed have neither field.
    return {
      ...stored,
      runId,
      status,
      live,
      summary: null,
      failure: null,
      restores: live.restores ?? stored.restores,
      parent: live.parent ?? stored.parent,
    };
  }
  if (status === 'COMPLETED') {
    return { runId, status, live: null, summary: upgradeRunSummary((await handle.result()) as RunSummary), failure: null, ...stored };
  }
  const failure = await handle.result().then(
    () => null,
    (err: unknown) => rootCauseMessage(err),
  );
  return { runId, status, live: null, summary: null, failure, ...stored };
}

export async function pauseRun(client: Client, runId: string, reason?: string): Promise<void> {
  await describeRun(client, runId);
  await client.workflow.getHandle(runId).signal(pauseSignal, { reason });
}

export async function resumeRun(client: Client, runId: string): Promise<void> {
  await describeRun(client, runId);
  await client.workflow.getHandle(runId).signal(resumeSignal);
}

/**
 * Changes safe settings of a running run (workflow update `updateConfig`):
 * validated by the run itself, so the message says what may change.
 */
export async function changeRunConfig(client: Client, runId: string, change: unknown): Promise<ConfigUpdateResult> {
  const description = await describeRun(client, runId);
  if (description.status.name !== 'RUNNING')
    throw new UserError(`run ${runId} is ${description.status.name}; only a running run's config can change`);
  try {
    return await client.workflow.getHandle(runId).executeUpdate(updateConfigUpdate, { args: [change] });
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError) throw new UserError(rootCauseMessage(err));
    // The run ended between the check and the update.
    const now = await describeRun(client, runId).catch(() => null);
    if (now && now.status.name !== 'RUNNING')
      throw new UserError(`run ${runId} is ${now.status.name}; only a running run's config can change`);
    throw err;
  }
}

export async function cancelRun(client: Client, runId: string): Promise<void> {
  await describeRun(client, runId);
  await client.workflow.getHandle(runId).cancel();
}

/**
 * Continues a run that failed, was terminated, canceled or timed out, in a new
 * execution with the same id: from the step after its last recorded one, with
 * that step's policy version and the newest profile version. Rollouts and
 * trainer steps already stored are reused, not redone.
 */
export async function recoverRun(client: Client, store: RunStore, runId: string) {
  const description = await describeRun(client, runId);
  const status = description.status.name;
  if (status === 'RUNNING') throw new UserError(`run ${runId} is still running; nothing to recover`);
  if (status === 'COMPLETED') throw new UserError(`run ${runId} completed; nothing to recover`);
  const run = await store.getRun(runId);
  if (!run) throw new UserError(`run ${runId} never got as far as registering in the run store; start it again instead`);
  const config = parseStoredRunConfig(run.config, `stored config of ${runId}`);
  const last = await store.lastStep(runId);
  const profileVersion = await store.latestProfileVersion(runId);
  const lastEvaluation = (await store.evaluations(runId)).at(-1) ?? null;
  const resume: ResumePoint | undefined =
    profileVersion === null
      ? undefined
      : { nextStep: last ? last.step + 1 : 0, policyVersion: last?.policyVersion ?? config.policy.model, profileVersion, lastEvaluation };
  // A fork that failed before its model was loaded from the parent's checkpoint loads it first.
  const forkLoaded = run.parent === null || (await store.findRestore(runId, null))?.status === 'done';
  const fork = forkLoaded || !resume ? undefined : run.parent!;
  const handle = await startRun(client, run.config, config, runId, { resume, ...(fork ? { fork } : {}) });
  return { handle, resume, previousStatus: status };
}

/**
 * Starts a new run from `parentRunId`'s training checkpoint at (or before)
 * step `fromStep`: the parent's config plus safe changes (core/config-change.ts),
 * its profiles of that time and its harness pool; its first step is the one
 * after the checkpoint's, and it records its parent in the run store and in
 * the search attribute HarnessParentRun.
 */
export async function forkRun(
  client: Client,
  store: RunStore,
  args: { parentRunId: string; fromStep: number; change?: unknown; runId?: string },
): Promise<{ runId: string; checkpointStep: number; resume: ResumePoint; config: RunConfig }> {
  const parent = await store.getRun(args.parentRunId);
  if (!parent) throw new UserError(`no run ${args.parentRunId} in the run store (see \`harness-s run list\`)`);
  const checkpoints = await store.checkpoints(args.parentRunId);
  const checkpoint = checkpoints.filter((c) => c.step <= args.fromStep).at(-1);
  if (!checkpoint) {
    throw new UserError(
      `run ${args.parentRunId} has no training checkpoint at or before step ${args.fromStep} ` +
        `(${checkpoints.length ? `its checkpoints are at steps ${checkpoints.map((c) => c.step).join(', ')}` : 'it has none: checkpoint.every sets how often a run saves one'})`,
    );
  }
  const parentConfig = parseStoredRunConfig(parent.config, `stored config of ${args.parentRunId}`);
  let config = parentConfig;
  if (args.change !== undefined) {
    try {
      config = applyConfigChange(parentConfig, args.change, checkpoint.step + 2);
    } catch (err) {
      throw new UserError((err as Error).message.replace(/^config change/, 'fork change'));
    }
  }
  if (config.steps <= checkpoint.step + 1) {
    throw new UserError(
      `the fork would start at step ${checkpoint.step + 1} of ${config.steps}: give it more steps with --changes, a file such as {"steps": N}`,
    );
  }
  // The newest profiles measured with a policy no later than the checkpoint's.
  const policies = new Set([
    parentConfig.policy.model,
    ...(await store.steps(args.parentRunId)).filter((s) => s.step <= checkpoint.step).map((s) => s.policyVersion),
  ]);
  const profileVersion = (await store.profileVersions(args.parentRunId)).filter((p) => policies.has(p.policyVersion)).at(-1)?.version;
  if (profileVersion === undefined)
    throw new UserError(`run ${args.parentRunId} has no behaviour profiles measured by step ${checkpoint.step}`);
  const runId = args.runId ?? `${args.parentRunId}-fork${checkpoint.step}-${Date.now().toString(36)}`;
  // A fork continues from a resume point, which lets it register over a stored run: an id in use is refused here.
  if (await store.getRun(runId)) throw new UserError(`run id ${runId} is already used by a run in the run store; choose another --id`);
  const resume: ResumePoint = { nextStep: checkpoint.step + 1, policyVersion: checkpoint.policyVersion, profileVersion };
  await startRun(client, config, config, runId, { resume, fork: { runId: args.parentRunId, step: checkpoint.step } });
  return { runId, checkpointStep: checkpoint.step, resume, config };
}

export interface RunListEntry {
  runId: string;
  status: string;
  name: string | null;
  env: string | null;
  step: number | null;
  baseSuccess: number | null;
  startTime: string;
}

export async function listRuns(client: Client, limit = 50): Promise<RunListEntry[]> {
  const entries: RunListEntry[] = [];
  // One entry per run: executions that continued as new are links of a chain, not runs, and a
  // recovered run's failed or terminated execution is its past (the newest execution is listed first).
  for await (const wf of client.workflow.list({ query: "WorkflowType = 'harnessSRun' AND ExecutionStatus != 'ContinuedAsNew'" })) {
    if (entries.some((e) => e.runId === wf.workflowId)) continue;
    const attrs = wf.typedSearchAttributes;
    entries.push({
      runId: wf.workflowId,
      status: wf.status.name,
      name: attrs.get(SEARCH_ATTRIBUTES.runName) ?? null,
      env: attrs.get(SEARCH_ATTRIBUTES.env) ?? null,
      step: attrs.get(SEARCH_ATTRIBUTES.step) ?? null,
      baseSuccess: attrs.get(SEARCH_ATTRIBUTES.baseSuccess) ?? null,
      startTime: wf.startTime.toISOString(),
    });
    if (entries.length >= limit) break;
  }
  return entries;
}

export interface HistoryStats {
  runId: string;
  /** Events in the run's current execution (it continues as new when long). */
  runEvents: number;
  steps: Array<{ step: number; events: number }>;
  meanEventsPerStep: number;
}

/** How large the run's histories are: the parent's and each step child's event counts. */
export async function historyStats(client: Client, runId: string, steps: number): Promise<HistoryStats> {
  const count = async (workflowId: string) => (await client.workflow.getHandle(workflowId).fetchHistory()).events?.length ?? 0;
  const perStep: HistoryStats['steps'] = [];
  for (let step = 0; step < steps; step++) {
    perStep.push({ step, events: await count(`${runId}/step-${step}`).catch(() => 0) });
  }
  const measured = perStep.filter((s) => s.events > 0);
  return {
    runId,
    runEvents: await count(runId),
    steps: measured,
    meanEventsPerStep: measured.length ? measured.reduce((n, s) => n + s.events, 0) / measured.length : 0,
  };
}
