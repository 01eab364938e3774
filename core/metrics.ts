/**
 * The project's Prometheus metrics, all named `harness_s_*`: what this
 * process's workers did (rollouts stored, episodes run, steps recorded,
 * trainer and policy calls, DBBench sandboxes). Served with the Temporal
 * SDK's own metrics by workers/metrics-server.ts. Several worker processes
 * each count their own work; Prometheus sums them.
 *
 * One registry per process, on purpose: like the Temporal runtime, metrics
 * describe the process, and a call site deep in a client (a re-poll of a
 * trainer future) should count with one line, not thread a registry through.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export const metricsRegistry = new Registry();

const SECONDS_SHORT = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const SECONDS_LONG = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 3600];

const rolloutsStored = new Counter({
  name: 'harness_s_rollouts_stored_total',
  help: 'Rollouts stored in the run store, counted once when first stored (a retried activity that finds its rollout stored does not count it again)',
  labelNames: ['env', 'harness', 'role', 'outcome'] as const,
  registers: [metricsRegistry],
});

const episodes = new Counter({
  name: 'harness_s_episodes_total',
  help: "Episodes run by this process, retries included; outcome success or failure by the episode's verdict, error when the episode threw",
  labelNames: ['env', 'harness', 'outcome'] as const,
  registers: [metricsRegistry],
});

const stepsRecorded = new Counter({
  name: 'harness_s_steps_recorded_total',
  help: "Training steps recorded in the run store (counted once, when the step's row is first inserted)",
  labelNames: ['env'] as const,
  registers: [metricsRegistry],
});

const deadGroups = new Counter({
  name: 'harness_s_dead_groups_total',
  help: 'Base groups with no reward signal (all rollouts equal), summed over recorded steps',
  labelNames: ['env'] as const,
  registers: [metricsRegistry],
});

const rescuedGroups = new Counter({
  name: 'harness_s_rescued_groups_total',
  help: 'Dead groups whose rescue group (sibling harnesses) has a reward signal, summed over recorded steps',
  labelNames: ['env'] as const,
  registers: [metricsRegistry],
});

const failedGroups = new Counter({
  name: 'harness_s_failed_groups_total',
  help: 'Groups whose rollouts failed for good and were left out of training, summed over recorded steps',
  labelNames: ['env', 'role'] as const,
  registers: [metricsRegistry],
});

const stepPhaseSeconds = new Histogram({
  name: 'harness_s_step_phase_seconds',
  help: "Wall time of each phase of a recorded training step: rollout (base and rescue groups), train (the trainer's update), publish",
  labelNames: ['env', 'phase'] as const,
  buckets: SECONDS_LONG,
  registers: [metricsRegistry],
});

const rescueLatency = new Histogram({
  name: 'harness_s_rescue_latency_seconds',
  help: "From the last rollout of a dead base group being stored to its rescue group's first attempt starting (routing and scheduling included; both ends on the run store's clock)",
  labelNames: ['env'] as const,
  buckets: SECONDS_SHORT,
  registers: [metricsRegistry],
});

const trainerOpSeconds = new Histogram({
  name: 'harness_s_trainer_op_seconds',
  help: 'Trainer (Tinker API) ops from first submit to result, polls and resubmits included; outcome ok or error',
  labelNames: ['op', 'outcome'] as const,
  buckets: SECONDS_LONG,
  registers: [metricsRegistry],
});

const trainerRestores = new Counter({
  name: 'harness_s_trainer_restores_total',
  help: "Trainer models made anew: kind checkpoint (restored from a run's checkpoint after the trainer lost its model), base (started over, no checkpoint yet), fork (a fork's first model)",
  labelNames: ['kind'] as const,
  registers: [metricsRegistry],
});

const trainerRetries = new Counter({
  name: 'harness_s_trainer_retries_total',
  help: 'Trainer requests sent again: a future polled again (try_again, poll_timeout, server_error, rate_limited, bad_request), an op resubmitted (future_gone), a request retried (unreachable)',
  labelNames: ['op', 'reason'] as const,
  registers: [metricsRegistry],
});

const policyRequestSeconds = new Histogram({
  name: 'harness_s_policy_request_seconds',
  help: "Chat completion requests to the policy endpoint, the client's own retries included; outcome ok or error",
  labelNames: ['outcome'] as const,
  buckets: SECONDS_SHORT,
  registers: [metricsRegistry],
});

const policyRequestErrors = new Counter({
  name: 'harness_s_policy_request_errors_total',
  help: 'Failed policy requests by status: the HTTP status, timeout, connection (unreachable), invalid_reply (an answer this client cannot train on), aborted (cancelled) or other',
  labelNames: ['status'] as const,
  registers: [metricsRegistry],
});

const sandboxSetups = new Counter({
  name: 'harness_s_dbbench_sandbox_setups_total',
  help: 'DBBench episode sandboxes (database, user, table) set up on the MySQL/MariaDB server; outcome ok or error',
  labelNames: ['outcome'] as const,
  registers: [metricsRegistry],
});

const sandboxSweeps = new Counter({
  name: 'harness_s_dbbench_sandbox_sweeps_total',
  help: 'Sweeps for sandboxes left behind by dead workers; outcome ok or error',
  labelNames: ['outcome'] as const,
  registers: [metricsRegistry],
});

const sandboxesSwept = new Counter({
  name: 'harness_s_dbbench_sandboxes_swept_total',
  help: 'Stale sandbox databases and users removed by sweeps',
  labelNames: ['kind'] as const,
  registers: [metricsRegistry],
});

const replicaInFlight = new Gauge({
  name: 'harness_s_replica_in_flight',
  help: 'Requests this process has in flight to each inference replica',
  labelNames: ['replica'] as const,
  registers: [metricsRegistry],
});

const replicaHealthy = new Gauge({
  name: 'harness_s_replica_healthy',
  help: 'Whether this process sends requests to an inference replica (1) or holds it out of rotation until its health check passes (0)',
  labelNames: ['replica'] as const,
  registers: [metricsRegistry],
});

const replicaRequests = new Counter({
  name: 'harness_s_replica_requests_total',
  help: 'Requests this process sent each inference replica; outcome ok, error (the request failed for its own reason), or the replica fault that failed it (unreachable, timeout, server_error, lost_adapter)',
  labelNames: ['replica', 'outcome'] as const,
  registers: [metricsRegistry],
});

const replicaLoads = new Counter({
  name: 'harness_s_replica_version_loads_total',
  help: 'Policy versions loaded on an inference replica and probed; reason publish (a new version) or reload (the replica had lost it)',
  labelNames: ['replica', 'reason', 'outcome'] as const,
  registers: [metricsRegistry],
});

export type Outcome = 'ok' | 'error';

export function recordRolloutStored(labels: { env: string; harness: string; role: string; success: boolean }): void {
  rolloutsStored.inc({ env: labels.env, harness: labels.harness, role: labels.role, outcome: labels.success ? 'success' : 'failure' });
}

/** Counts an episode once it settles (success, failure or error) and hands back its result unchanged. */
export async function countEpisode<T extends { success: boolean }>(
  labels: { env: string; harness: string },
  episode: Promise<T>,
): Promise<T> {
  try {
    const result = await episode;
    episodes.inc({ ...labels, outcome: result.success ? 'success' : 'failure' });
    return result;
  } catch (err) {
    episodes.inc({ ...labels, outcome: 'error' });
    throw err;
  }
}

export interface RecordedStep {
  deadGroups: number;
  rescuedGroups: number;
  phaseSeconds?: { rollout: number; train: number; publish: number } | null;
  failedGroups?: ReadonlyArray<{ role: string }>;
}

/** A step newly recorded in the run store: its dead, rescued and failed groups and its phase durations. */
export function recordStepMetrics(env: string, step: RecordedStep): void {
  stepsRecorded.inc({ env });
  deadGroups.inc({ env }, step.deadGroups);
  rescuedGroups.inc({ env }, step.rescuedGroups);
  for (const group of step.failedGroups ?? []) failedGroups.inc({ env, role: group.role });
  // Steps of histories from before the phases were timed have none.
  if (step.phaseSeconds) {
    for (const phase of ['rollout', 'train', 'publish'] as const) stepPhaseSeconds.observe({ env, phase }, step.phaseSeconds[phase]);
  }
}

const runStalled = new Gauge({
  name: 'harness_s_run_stalled',
  help: "1 while a run's health rule finds it stalled (no learning signal, or no gain in eval success), 0 once it learns again; set by the process that reported the run's last change (read with max by (run_id))",
  labelNames: ['run_id', 'env'] as const,
  registers: [metricsRegistry],
});

/** A run's health changed (core/rl/run-health.ts). */
export function setRunStalled(runId: string, env: string, stalled: boolean): void {
  runStalled.set({ run_id: runId, env }, stalled ? 1 : 0);
}

export function observeRescueLatency(env: string, seconds: number | null): void {
  if (seconds !== null) rescueLatency.observe({ env }, Math.max(0, seconds));
}

/** Times one trainer op, counting it as ok or error by how `run` settles. */
export async function timeTrainerOp<T>(op: string, run: () => Promise<T>): Promise<T> {
  const end = trainerOpSeconds.startTimer({ op });
  try {
    const result = await run();
    end({ outcome: 'ok' });
    return result;
  } catch (err) {
    end({ outcome: 'error' });
    throw err;
  }
}

export type TrainerRetryReason =
  'try_again' | 'poll_timeout' | 'server_error' | 'rate_limited' | 'bad_request' | 'future_gone' | 'unreachable';

export function countTrainerRestore(kind: 'checkpoint' | 'base' | 'fork'): void {
  trainerRestores.inc({ kind });
}

export function countTrainerRetry(op: string, reason: TrainerRetryReason): void {
  trainerRetries.inc({ op, reason });
}

/** Times one policy request; a failure is also counted by `statusOf(error)`. */
export async function timePolicyRequest<T>(run: () => Promise<T>, statusOf: (err: unknown) => string): Promise<T> {
  const end = policyRequestSeconds.startTimer();
  try {
    const result = await run();
    end({ outcome: 'ok' });
    return result;
  } catch (err) {
    end({ outcome: 'error' });
    policyRequestErrors.inc({ status: statusOf(err) });
    throw err;
  }
}

export function countSandboxSetup(outcome: Outcome): void {
  sandboxSetups.inc({ outcome });
}

export function countSandboxSweep(outcome: Outcome, removed?: { databases: number; users: number }): void {
  sandboxSweeps.inc({ outcome });
  if (removed) {
    sandboxesSwept.inc({ kind: 'database' }, removed.databases);
    sandboxesSwept.inc({ kind: 'user' }, removed.users);
  }
}

/** A replica's requests in flight from this process, and whether it is in rotation. */
export function setReplicaState(replica: string, inFlight: number, healthy: boolean): void {
  replicaInFlight.set({ replica }, inFlight);
  replicaHealthy.set({ replica }, healthy ? 1 : 0);
}

export function countReplicaRequest(replica: string, outcome: string): void {
  replicaRequests.inc({ replica, outcome });
}

export function countReplicaLoad(replica: string, reason: 'publish' | 'reload', outcome: Outcome): void {
  replicaLoads.inc({ replica, reason, outcome });
}
