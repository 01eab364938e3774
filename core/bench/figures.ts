/**
 * `harness-s bench`: its figures and how they are computed from what a run
 * recorded (pure), and the table it prints. Times in a row come from the sim
 * cluster's latency model and are SIMULATED; the overhead figures are wall
 * clock on this machine.
 */
import type { StoredStepSummary } from '../store/rows';

/** (a) Orchestration overhead of one rollout phase: in-process vs as Temporal activities, the same rollouts. */
export interface OverheadFigures {
  rollouts: number;
  tasks: number;
  groupSize: number;
  /** Rollouts at once inside one group (rollout.concurrency); groups at once as the rollout worker's slots. */
  concurrency: number;
  groupsAtOnce: number;
  /** Each figure is a mean over this many measurements (Temporal: identical 1-step runs; in-process: passes). */
  repeats: number;
  inProcessMsPerRollout: number;
  temporalMsPerRollout: number;
  overheadMsPerRollout: number;
  /**
   * Of the overhead: the run-store writes (insertTrajectories per rollout, rolloutSummaries twice per group), as
   * they lengthen the phase: the same rollouts in process with those writes, less without.
   */
  storeWritesMsPerRollout: number;
  /** The same writes timed alone, for the same rows: their cost when nothing overlaps them. */
  storeWritesAloneMsPerRollout: number;
  /** Of the overhead: the rest, activity scheduling (tasks, heartbeats, results, workflow tasks, progress signals). */
  schedulingMsPerRollout: number;
  /** Max - min over the repeats, per rollout: how far apart measurements of the same thing fell. */
  spreadMsPerRollout: { inProcess: number; inProcessWithStore: number; temporal: number };
  /** Not part of the rollout phase: the step's trainer call (phaseSeconds.train) and publish, reported separately. */
  trainerSeconds: number;
  trainerMsPerRollout: number;
  publishSeconds: number;
  runIds: string[];
}

/** (b) One run of a few steps under one latency profile and one staleness bound. */
export interface BenchRow {
  profile: string;
  /** pipeline.maxStaleness: 0 is sync. */
  maxStaleness: number;
  /** true: seconds are the sim's latency model's (SIMULATED); false: no latency model answered, wall seconds. */
  simulated: boolean;
  speedup: number;
  steps: number;
  /** Sim-clock seconds per step, from step 0's start to the last step's end (the run's profiling excluded). */
  stepSeconds: number;
  /** Means over the steps of their phases (phaseSeconds x speedup). */
  rolloutSeconds: number;
  trainSeconds: number;
  rolloutsPerSecond: number;
  /** Trainer tokens (real-equivalent: sim tokens x the profile's tokenScale) per second; null without the latency model. */
  trainedTokensPerSecond: number | null;
  /** 1 - busy / elapsed over the window, from /sim/latency; null without the latency model. */
  inferenceIdleShare: number | null;
  trainerIdleShare: number | null;
  /** Mean staleness the steps trained at (0 unless pipelined). */
  meanStaleness: number;
  rollouts: number;
  windowSeconds: number;
  runId: string;
}

/** (c) Events of a run's histories (every execution of the run id) and of each step child. */
export interface RunHistory {
  label: string;
  runId: string;
  executions: number;
  runEvents: number;
  stepEvents: number[];
}

export interface HistoryFigures {
  runs: RunHistory[];
  /** Over the runs of (b): all their histories, run and step children, per run and per step. */
  meanEventsPerRun: number;
  meanEventsPerStep: number;
  meanRunEventsPerStep: number;
}

export interface BenchResult {
  /** The smallest size's figures (512 rollouts in the standard bench). */
  overhead: OverheadFigures;
  overheadBySize: OverheadFigures[];
  rows: BenchRow[];
  history: HistoryFigures;
  machine: { cpus: number; node: string };
}

/** What /sim/latency reported over a row's window (seconds SIMULATED). */
export interface LatencyWindow {
  speedup: number;
  tokenScale?: number;
  simulatedSeconds: number;
  inference: { busySeconds: number };
  trainer: { busySeconds: number; tokens?: number };
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const idle = (busy: number, elapsed: number) => Math.min(1, Math.max(0, 1 - busy / elapsed));

/** Per-rollout figures from repeated measurements of the same rollouts (ms per pass, phase seconds per run). */
export function overheadFigures(m: {
  tasks: number;
  groupSize: number;
  concurrency: number;
  groupsAtOnce: number;
  inProcessMs: number[];
  inProcessWithStoreMs: number[];
  storeWritesAloneMs: number[];
  phaseSeconds: Array<{ rollout: number; train: number; publish: number }>;
  runIds: string[];
}): OverheadFigures {
  const rollouts = m.tasks * m.groupSize;
  const perRollout = (ms: number[]) => mean(ms) / rollouts;
  const spread = (ms: number[]) => (Math.max(...ms) - Math.min(...ms)) / rollouts;
  const temporalMs = m.phaseSeconds.map((p) => p.rollout * 1000);
  const inProcessMsPerRollout = perRollout(m.inProcessMs);
  const temporalMsPerRollout = perRollout(temporalMs);
  const overheadMsPerRollout = temporalMsPerRollout - inProcessMsPerRollout;
  const storeWritesMsPerRollout = perRollout(m.inProcessWithStoreMs) - inProcessMsPerRollout;
  const trainerSeconds = mean(m.phaseSeconds.map((p) => p.train));
  return {
    rollouts,
    tasks: m.tasks,
    groupSize: m.groupSize,
    concurrency: m.concurrency,
    groupsAtOnce: m.groupsAtOnce,
    repeats: Math.min(m.inProcessMs.length, temporalMs.length),
    inProcessMsPerRollout,
    temporalMsPerRollout,
    overheadMsPerRollout,
    storeWritesMsPerRollout,
    storeWritesAloneMsPerRollout: perRollout(m.storeWritesAloneMs),
    schedulingMsPerRollout: overheadMsPerRollout - storeWritesMsPerRollout,
    spreadMsPerRollout: {
      inProcess: spread(m.inProcessMs),
      inProcessWithStore: spread(m.inProcessWithStoreMs),
      temporal: spread(temporalMs),
    },
    trainerSeconds,
    trainerMsPerRollout: (trainerSeconds * 1000) / rollouts,
    publishSeconds: mean(m.phaseSeconds.map((p) => p.publish)),
    runIds: m.runIds,
  };
}

/**
 * A row from the run's step summaries, its steps' wall window (step 0's start
 * to the last step's end, Temporal's timestamps) and, with the latency model,
 * its report over that window.
 */
export function rowFigures(r: {
  profile: string;
  maxStaleness: number;
  runId: string;
  steps: readonly StoredStepSummary[];
  wallWindowSeconds: number;
  latency: LatencyWindow | null;
}): BenchRow {
  const speedup = r.latency?.speedup ?? 1;
  const windowSeconds = r.wallWindowSeconds * speedup;
  const phases = r.steps.flatMap((s) => (s.phaseSeconds ? [s.phaseSeconds] : []));
  const rollouts = r.steps.reduce((n, s) => n + s.baseRollouts + s.rescueRollouts, 0);
  const l = r.latency;
  const tokens = l?.trainer.tokens === undefined ? null : l.trainer.tokens * (l.tokenScale ?? 1);
  return {
    profile: r.profile,
    maxStaleness: r.maxStaleness,
    simulated: l !== null,
    speedup,
    steps: r.steps.length,
    stepSeconds: windowSeconds / r.steps.length,
    rolloutSeconds: mean(phases.map((p) => p.rollout)) * speedup,
    trainSeconds: mean(phases.map((p) => p.train)) * speedup,
    rolloutsPerSecond: rollouts / windowSeconds,
    trainedTokensPerSecond: l && tokens !== null ? tokens / l.simulatedSeconds : null,
    inferenceIdleShare: l ? idle(l.inference.busySeconds, l.simulatedSeconds) : null,
    trainerIdleShare: l ? idle(l.trainer.busySeconds, l.simulatedSeconds) : null,
    meanStaleness: mean(r.steps.map((s) => s.staleness ?? 0)),
    rollouts,
    windowSeconds,
    runId: r.runId,
  };
}

/** Per run and per step, over the runs whose label starts with `rowsPrefix` (the rows of (b)). */
export function historyFigures(runs: RunHistory[], rowsPrefix: string): HistoryFigures {
  const rows = runs.filter((r) => r.label.startsWith(rowsPrefix));
  const total = (r: RunHistory) => r.runEvents + r.stepEvents.reduce((a, b) => a + b, 0);
  return {
    runs,
    meanEventsPerRun: mean(rows.map(total)),
    meanEventsPerStep: mean(rows.map((r) => total(r) / Math.max(1, r.stepEvents.length))),
    meanRunEventsPerStep: mean(rows.map((r) => r.runEvents / Math.max(1, r.stepEvents.length))),
  };
}

/** `--json`: {"overhead", "overheadBySize", "rows", "history"}, numbers to 4 decimals (float noise out). */
export function benchJson(result: BenchResult): string {
  const { overhead, overheadBySize, rows, history } = result;
  const rounded = (_key: string, value: unknown) =>
    typeof value === 'number' && !Number.isInteger(value) ? Number(value.toFixed(4)) : value;
  return JSON.stringify({ overhead, overheadBySize, rows, history }, rounded, 2);
}

const f = (x: number | null, digits = 2) => (x === null ? '-' : x.toFixed(digits));
const pct = (x: number | null) => (x === null ? '-' : `${(x * 100).toFixed(0)}%`);
const pad = (cells: Array<string | number>, widths: number[]) =>
  cells.map((c, i) => String(c)[i === 0 ? 'padEnd' : 'padStart'](widths[i])).join('  ');

/** The table `harness-s bench` prints. */
export function benchText(result: BenchResult): string {
  const lines: string[] = [`harness-s bench: ${result.machine.cpus} CPUs, Node ${result.machine.node}; one machine, one run`];
  lines.push('', '(a) orchestration overhead per rollout: sim env, zero-latency sim cluster, wall clock (ms per rollout)');
  const wa = [9, 9, 10, 9, 9, 10, 12, 8, 10, 12];
  lines.push(
    pad(
      ['rollouts', 'tasks x G', 'in-process', 'temporal', 'overhead', 'scheduling', 'store writes', '(alone)', 'trainer s', 'spread +-'],
      wa,
    ),
  );
  for (const o of result.overheadBySize) {
    lines.push(
      pad(
        [
          o.rollouts,
          `${o.tasks} x ${o.groupSize}`,
          f(o.inProcessMsPerRollout),
          f(o.temporalMsPerRollout),
          f(o.overheadMsPerRollout),
          f(o.schedulingMsPerRollout),
          f(o.storeWritesMsPerRollout),
          f(o.storeWritesAloneMsPerRollout),
          f(o.trainerSeconds),
          f(Math.max(o.spreadMsPerRollout.inProcess, o.spreadMsPerRollout.inProcessWithStore, o.spreadMsPerRollout.temporal) / 2),
        ],
        wa,
      ),
    );
  }
  lines.push(
    '  overhead = temporal - in-process = scheduling + store writes. store writes: in-process with the writes less without',
    "  (they overlap the episodes); (alone): the same writes with nothing else running. trainer s: the step's trainer",
    '  call, outside the rollout phase. Rescue off: every rollout is a base rollout. Means of the repeats; spread: half',
    "  the widest max - min of one figure over its repeats (this machine's noise).",
  );
  const simulated = result.rows.some((r) => r.simulated);
  const speedups = [...new Set(result.rows.map((r) => r.speedup))].join(', ');
  lines.push(
    '',
    simulated
      ? `(b) step time and throughput, SIMULATED (the sim cluster's latency model at speedup ${speedups}x; seconds are simulated)`
      : '(b) step time and throughput: no latency model answered /sim/latency, so wall seconds (not SIMULATED GPU time)',
  );
  const wb = [20, 6, 8, 9, 8, 10, 10, 8, 8, 9];
  lines.push(pad(['profile', 'k', 'step s', 'rollout s', 'train s', 'rollouts/s', 'tokens/s', 'inf idle', 'trn idle', 'staleness'], wb));
  for (const r of result.rows) {
    lines.push(
      pad(
        [
          `${r.profile}${r.simulated ? '' : ' (wall)'}`,
          r.maxStaleness === 0 ? '0 sync' : String(r.maxStaleness),
          f(r.stepSeconds, 1),
          f(r.rolloutSeconds, 1),
          f(r.trainSeconds, 1),
          f(r.rolloutsPerSecond),
          f(r.trainedTokensPerSecond, 0),
          pct(r.inferenceIdleShare),
          pct(r.trainerIdleShare),
          f(r.meanStaleness),
        ],
        wb,
      ),
    );
  }
  const h = result.history;
  lines.push(
    '',
    `(c) Temporal history events: ${f(h.meanEventsPerRun, 0)} per run of (b) (run and step children), ${f(h.meanEventsPerStep, 1)} per step (${f(h.meanRunEventsPerStep, 1)} of them in the run's own history)`,
  );
  const wc = [24, 10, 10, 30];
  lines.push(pad(['run', 'executions', 'run events', 'events per step child'], wc));
  for (const r of h.runs) lines.push(pad([r.label, r.executions, r.runEvents, r.stepEvents.join(' ')], wc));
  return lines.join('\n');
}
