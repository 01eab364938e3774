/**
 * The demo's closing summary: base-harness success on the eval split before
 * training and after the last step, the change with its 95% interval, dead
 * and rescued groups, Rank-1 routing, and where to look once the stack has
 * stopped. Pure: a recorded summary in, lines out.
 */
import type { EvaluationSummary, RunSummary } from '../workflows/definitions';
import { rateDifference, type RateDifference } from '../core/stats';

export interface DemoSummary {
  run: RunSummary;
  /** Wall-clock seconds of the whole demo: stack up, run, evaluations, report, stack down. */
  seconds: number;
  /** The eval split under the base policy (before training) and after the last step; null when the run does not evaluate. */
  evalStart: EvaluationSummary | null;
  evalEnd: EvaluationSummary | null;
  /** Whether the eval tasks are held out of training (eval.heldOut > 0). */
  heldOut: boolean;
  /** Base-harness success after minus before, with Newcombe's 95% interval over the eval rollouts; null without both evaluations. */
  baseChange: RateDifference | null;
  /** Where to look afterwards: the report file stays; the addresses answer once `harness-s dev` runs. */
  reportFile: string;
  temporalUi: string;
  viewer: string | null;
}

export function demoSummary(args: Omit<DemoSummary, 'baseChange'>): DemoSummary {
  const { evalStart: start, evalEnd: end } = args;
  const successes = (e: EvaluationSummary) => Math.round(e.base.successRate * e.base.rollouts);
  const baseChange =
    start && end && start.base.rollouts > 0 && end.base.rollouts > 0
      ? rateDifference(successes(start), start.base.rollouts, successes(end), end.base.rollouts)
      : null;
  return { ...args, baseChange };
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const points = (x: number) => `${x >= 0 ? '+' : '-'}${Math.abs(x * 100).toFixed(1)}`;

function duration(seconds: number): string {
  const s = Math.round(seconds);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
}

function changeLine(change: RateDifference): string {
  const interval = `${points(change.difference)} points, 95% interval [${points(change.lo)}, ${points(change.hi)}]`;
  if (!change.excludesZero) {
    return `${interval}: within noise (the interval includes 0); this one run cannot tell the change from chance`;
  }
  return `${interval}: a ${change.difference > 0 ? 'rise' : 'fall'} beyond noise (the interval excludes 0)`;
}

export function demoSummaryLines(s: DemoSummary): string[] {
  const { run, evalStart: start, evalEnd: end } = s;
  const label = run.simulated ? ' [SIMULATED: sim policy, sim environment, sim trainer]' : '';
  const row = (name: string, text: string) => `  ${name.padEnd(24)}${text}`;
  const lines = [`Demo summary${label}`, row('run', `${run.runId}: ${run.stepsCompleted} steps, ${duration(s.seconds)} in all`)];
  if (start && end) {
    const split = s.heldOut ? 'held-out' : 'eval (not held out: eval.heldOut is 0)';
    lines.push(
      row(
        'base-harness success',
        `${pct(start.base.successRate)} before training -> ${pct(end.base.successRate)} after ${end.afterSteps} steps ` +
          `(${start.tasks} ${split} tasks x ${start.rolloutsPerTask} rollouts, ${start.base.rollouts} before and ${end.base.rollouts} after)`,
      ),
      row('change', s.baseChange ? changeLine(s.baseChange) : '-'),
    );
  } else {
    const missing = end
      ? `${pct(end.base.successRate)} after ${end.afterSteps} steps on the eval split, but no evaluation before training: no interval`
      : 'no evaluation on the eval split (eval.enabled is false): no interval';
    lines.push(
      row('base-harness success', missing),
      row(
        '  in training batches',
        `${run.baseSuccessStart === null ? '-' : pct(run.baseSuccessStart)} at the first step -> ` +
          `${run.baseSuccessEnd === null ? '-' : pct(run.baseSuccessEnd)} at the last`,
      ),
    );
  }
  lines.push(
    row('dead groups', `${run.deadGroups} (groups whose every base-harness rollout failed: no learning signal)`),
    row('rescued', `${run.rescuedGroups} of them, by sibling harnesses (${run.rescueRollouts} rescue rollouts)`),
  );
  if (start && end) {
    lines.push(row('Rank-1 routing (eval)', `${pct(start.rank1.successRate)} before training -> ${pct(end.rank1.successRate)} after`));
  }
  lines.push(
    '',
    'The stack has stopped; the run stays stored. To look at it again:',
    `  its report, a file:      ${s.reportFile}`,
    `  \`npx harness-s dev\`, then the Temporal Web UI: ${s.temporalUi}`,
    ...(s.viewer ? [`  and the trajectory viewer (also \`npx harness-s ui\` alone): ${s.viewer}`] : []),
  );
  return lines;
}
