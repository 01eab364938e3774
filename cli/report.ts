/** Human-readable views of runs and steps. */
import { replicaLines } from '../workflows/replica-status';
import type { StepSummary } from '../core/rl/step-summary';
import type { EvaluationSummary, InFlightStep, ParentRun, RestoreEvent, RunStatus, RunSummary } from '../workflows/definitions';
import { isSimulatedEnv } from '../core/sim-kind';

const pct = (x: number | null | undefined) => (x === null || x === undefined ? '-' : `${(x * 100).toFixed(1)}%`);

export function stepLine(s: StepSummary): string {
  const rollouts = s.baseRollouts + s.rescueRollouts;
  const rate = s.durationSeconds > 0 ? rollouts / s.durationSeconds : 0;
  return (
    `step ${String(s.step).padStart(3)}  base success ${pct(s.baseSuccessRate).padStart(6)}  ` +
    `dead ${String(s.deadGroups).padStart(2)}/${s.tasks}  rescued ${String(s.rescuedGroups).padStart(2)}  ` +
    `live groups ${pct(s.liveGroupFraction).padStart(6)}  ` +
    // Reward and mismatch are absent from steps recorded before they were summarised.
    (typeof s.baseMeanReward === 'number' ? `reward ${s.baseMeanReward.toFixed(3)}  ` : '') +
    (s.logprobMismatch ? `|Δlogp| ${s.logprobMismatch.meanAbsDiff.toExponential(1)}  ` : '') +
    (s.staleness ? `stale ${s.staleness}  ` : '') +
    (s.sampling ? `drew ${s.sampling.drawn}, dropped ${s.sampling.dropped.length}  ` : '') +
    `${rate.toFixed(0)} rollouts/s  -> ${s.policyVersion}`
  );
}

export function evaluationLine(e: EvaluationSummary): string {
  const routes = Object.entries(e.rank1Routes)
    .map(([kind, harness]) => `${kind}->${harness}`)
    .join(', ');
  return (
    `eval after ${e.afterSteps} steps (${e.policyVersion}, ${e.tasks} tasks x ${e.rolloutsPerTask} rollouts per arm): ` +
    `base harness ${pct(e.base.successRate)}, Rank-1 ${pct(e.rank1.successRate)} (profiles v${e.profileVersion}: ${routes})`
  );
}

export function statusText(status: RunStatus): string {
  const lines = [
    `run ${status.runId} (${status.name}, env ${status.env}${isSimulatedEnv(status.env) ? ', SIMULATED' : ''})`,
    `  phase ${status.phase}, step ${status.step}/${status.steps}, policy ${status.policyVersion}, profiles v${status.profileVersion ?? '-'}` +
      (status.profileShift === null
        ? ''
        : ` (last re-anchoring moved rescue rates by ${(status.profileShift * 100).toFixed(1)} points on average)`),
    `  ${status.paused ? `PAUSED: ${status.pauseReason}` : 'not paused'}`,
    ...(status.health
      ? [
          `  health: ${status.health.state === 'stalled' ? `STALLED since step ${status.health.sinceStep}: ${status.health.reasons.join('; ')}` : 'learning'}`,
        ]
      : []),
    ...(status.spent
      ? [`  spent: ${status.spent.rollouts} rollouts, ${status.spent.tokens} policy tokens${budgetLine(status.budget)}`]
      : []),
  ];
  for (const s of status.inFlight ?? []) lines.push(`  in flight: ${inFlightText(s)}`);
  for (const line of replicaLines(status.replicas ?? [])) lines.push(`  ${line}`);
  if (status.lastStep) lines.push(`  last ${stepLine(status.lastStep)}`);
  if (status.lastEvaluation) lines.push(`  last ${evaluationLine(status.lastEvaluation)}`);
  lines.push(...lineageLines(status));
  return lines.join('\n');
}

function budgetLine(budget: RunStatus['budget']): string {
  if (!budget) return '';
  return budget.rollouts !== undefined ? ` (budget ${budget.rollouts} rollouts)` : ` (budget ${budget.tokens} policy tokens)`;
}

/** A running step and its phase: "step 6 rollouts on v5: 3/16 base groups done, 1 rescue started". */
export function inFlightText(s: InFlightStep): string {
  if (s.phase !== 'rollouts') return `step ${s.step} ${s.phase.replace(/-/g, ' ')} (sampled with ${s.policyVersion})`;
  const failed = s.failedGroups ? `, ${s.failedGroups} failed` : '';
  return `step ${s.step} rollouts on ${s.policyVersion}: ${s.groupsDone}/${s.groups} base groups done, ${s.rescuesStarted} rescues started${failed}`;
}

/** A run's fork parent and trainer restores, one line each (none for a run that has neither). */
export function lineageLines(view: { restores?: RestoreEvent[]; parent?: ParentRun | null }): string[] {
  const lines: string[] = [];
  if (view.parent) lines.push(`  forked from run ${view.parent.runId} at its checkpoint of step ${view.parent.step}`);
  for (const r of view.restores ?? []) {
    const from = r.fromStep === null ? 'the base model (no checkpoint yet)' : `the checkpoint of step ${r.fromStep}`;
    const rerun = r.fromStep === null ? 0 : r.fromStep + 1;
    lines.push(
      `  restore ${r.restore} at ${r.at}: the trainer lost the model at step ${r.atStep}; restored from ${from}, steps ${rerun}..${r.atStep} re-run`,
    );
  }
  return lines;
}

export function summaryText(summary: RunSummary): string {
  const lines = [
    `Harness-S run ${summary.runId} (${summary.name})${summary.simulated ? ' [SIMULATED: sim policy, sim environment, sim trainer]' : ''}`,
    `  steps completed            ${summary.stepsCompleted}`,
    `  final policy version       ${summary.policyVersion}`,
    `  base-harness success       ${pct(summary.baseSuccessStart)} at the start -> ${pct(summary.baseSuccessEnd)} at the end`,
    ...(summary.rewardStart != null && summary.rewardEnd != null
      ? [
          `  mean reward (base)         ${summary.rewardStart.toFixed(3)} ± ${(summary.rewardStartStdErr ?? 0).toFixed(3)} at the start -> ${summary.rewardEnd.toFixed(3)} ± ${(summary.rewardEndStdErr ?? 0).toFixed(3)} at the end (± standard error)`,
        ]
      : []),
    ...(summary.logprobMismatch != null
      ? [`  trainer/sampler mismatch   mean |Δ log-prob| ${summary.logprobMismatch.toExponential(2)} over the trained tokens`]
      : []),
    // Pipelined runs: the mismatch per staleness, what the overlap costs in off-policyness.
    ...(Object.keys(summary.mismatchByStaleness).some((k) => k !== '0')
      ? [
          `  by staleness               ${Object.entries(summary.mismatchByStaleness)
            .map(
              ([k, m]) =>
                `${k}: ${m.steps} steps, |Δ log-prob| ${m.meanAbsDiff === null ? '-' : m.meanAbsDiff.toExponential(2)}, ratio ${m.ratioMean === null ? '-' : `${m.ratioMean.toFixed(3)} ± ${m.ratioStd!.toFixed(3)}`}`,
            )
            .join('; ')}`,
        ]
      : []),
    `  dead groups                ${summary.deadGroups}`,
    `  groups rescued             ${summary.rescuedGroups} (rescue rollouts: ${summary.rescueRollouts})`,
    `  live-group fraction        ${pct(summary.liveGroupFraction)} (mean over steps)`,
    ...(summary.spend
      ? [
          `  spent                      ${summary.spend.rollouts} rollouts, ${summary.spend.policyTokens} policy tokens (${summary.spend.promptTokens} prompt, ${summary.spend.completionTokens} completion), ${summary.spend.trainerTokens} trainer tokens` +
            (summary.spend.gpuSeconds === null ? '' : `, ${summary.spend.gpuSeconds.toFixed(1)} GPU-seconds (SIMULATED, latency model)`),
        ]
      : []),
    `  eval split at the end      base harness ${pct(summary.baseEvalEnd)}, Rank-1 routing ${pct(summary.rank1EvalEnd)}`,
    ...summary.evaluations.map((e) => `    ${evaluationLine(e)}`),
    '  rescue rate per sibling (groups rescued / groups chosen): whole run, first half -> second half; by task kind',
  ];
  const siblings = Object.entries(summary.siblings).sort(([a], [b]) => a.localeCompare(b));
  if (siblings.length === 0) lines.push('    (no rescues)');
  for (const [id, stats] of siblings) {
    const kinds = Object.entries(stats.byKind)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([kind, k]) => `${kind} ${k.groupsRescued}/${k.groupsChosen}`)
      .join(', ');
    const rate = (x: { groupsChosen: number; groupsRescued: number }) =>
      pct(x.groupsChosen ? x.groupsRescued / x.groupsChosen : null).padStart(6);
    lines.push(`    ${id.padEnd(18)} ${rate(stats)}  ${rate(stats.firstHalf)} -> ${rate(stats.secondHalf)}  (${kinds})`);
  }
  return lines.join('\n');
}
