/**
 * What a run looks like to an experiment tracker: its config as flat params,
 * each recorded step's figures and each evaluation's success rates as metric
 * points. Pure: the same stored rows give the same points (timestamps are the
 * rows' own), so logging them twice writes the same points.
 */
import type { EvaluationSummary } from '../rl/evaluation';
import type { StoredStepSummary } from '../store/rows';
import type { MetricPoint, Param } from './tracker';

/**
 * The config as dot-keyed params (`rollout.groupSize` = "8"): scalars as
 * their JSON text, arrays by index (`harnessPool.0`), an empty array or
 * object as "[]" / "{}" so that it still shows. Sorted by key.
 */
export function flattenConfig(config: unknown): Param[] {
  const params: Param[] = [];
  const walk = (value: unknown, key: string) => {
    if (value === undefined) return;
    if (value !== null && typeof value === 'object') {
      const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
      if (entries.length === 0 && key) params.push({ key, value: Array.isArray(value) ? '[]' : '{}' });
      for (const [k, v] of entries) walk(v, key ? `${key}.${k}` : k);
      return;
    }
    params.push({ key, value: typeof value === 'string' ? value : JSON.stringify(value) });
  };
  walk(config, '');
  return params.sort((a, b) => a.key.localeCompare(b.key));
}

/** A name from a trainer's metrics (`loss:sum`, `optim/step`) as a metric key trackers accept: letters, digits, _ - . / and spaces. */
export function metricKey(name: string): string {
  return name.replace(/[^A-Za-z0-9_\-./ ]/g, '_');
}

/**
 * A step's figures at its step number, timestamped when it was recorded:
 * base success and reward, dead/rescued/failed groups, the live share, the
 * rescue rate (rescued over dead; absent with no dead group), the trainer's
 * metrics (`trainer/<name>`), the trainer/sampler log-prob mismatch, phase
 * and step seconds, staleness (pipelined steps), and spend.
 */
export function stepMetricPoints(summary: StoredStepSummary, completedAt: Date): MetricPoint[] {
  const figures: Array<[string, number | null | undefined]> = [
    ['base_success', summary.baseSuccessRate],
    ['base_reward', summary.baseMeanReward],
    ['base_reward_stderr', summary.baseRewardStdErr],
    ['dead_groups', summary.deadGroups],
    ['rescued_groups', summary.rescuedGroups],
    ['failed_groups', summary.failedGroups.length],
    ['live_share', summary.liveGroupFraction],
    ['live_drawn_share', summary.liveDrawnFraction],
    ['rescue_rate', summary.deadGroups > 0 ? summary.rescuedGroups / summary.deadGroups : null],
    ['datums', summary.datums],
    ...Object.entries(summary.trainerMetrics).map(([name, value]): [string, number] => [`trainer/${metricKey(name)}`, value]),
    ['mismatch/mean_abs_diff', summary.logprobMismatch?.meanAbsDiff],
    ['mismatch/ratio_mean', summary.logprobMismatch?.ratioMean],
    ['mismatch/ratio_std', summary.logprobMismatch?.ratioStd],
    ['mismatch/ratio_min', summary.logprobMismatch?.ratioMin],
    ['mismatch/ratio_max', summary.logprobMismatch?.ratioMax],
    ['mismatch/tokens', summary.logprobMismatch?.tokens],
    ['mismatch/publish_probe_mean_abs_diff', summary.publishProbeMeanAbsDiff],
    ['seconds/step', summary.durationSeconds],
    ['seconds/rollout', summary.phaseSeconds?.rollout],
    ['seconds/train', summary.phaseSeconds?.train],
    ['seconds/publish', summary.phaseSeconds?.publish],
    ['seconds/wait_for_trainer', summary.phaseSeconds?.waitForTrainer],
    ['seconds/wait_to_publish', summary.phaseSeconds?.waitToPublish],
    ['staleness', summary.staleness],
    ['spend/rollouts', summary.spend?.rollouts],
    ['spend/prompt_tokens', summary.spend?.promptTokens],
    ['spend/completion_tokens', summary.spend?.completionTokens],
    ['spend/trainer_tokens', summary.spend?.trainerTokens],
    ['spend/gpu_seconds', summary.spend?.gpuSeconds],
  ];
  return points(figures, summary.step, completedAt);
}

/** An evaluation's success rates (base harness and Rank-1 routing, overall and per task kind) at step `afterSteps`. */
export function evaluationMetricPoints(summary: EvaluationSummary, recordedAt: Date): MetricPoint[] {
  const byKind = (arm: 'base' | 'rank1') =>
    Object.entries(summary[arm].byKind).map(([kind, result]): [string, number] => [
      `eval/${arm}_success/${metricKey(kind)}`,
      result.successRate,
    ]);
  const figures: Array<[string, number]> = [
    ['eval/base_success', summary.base.successRate],
    ['eval/rank1_success', summary.rank1.successRate],
    ['eval/rank1_gain', summary.rank1.successRate - summary.base.successRate],
    ...byKind('base'),
    ...byKind('rank1'),
  ];
  return points(figures, summary.afterSteps, recordedAt);
}

/** Finite figures only: a tracker refuses NaN in JSON, and a figure not measured is left out, not logged as 0. */
function points(figures: ReadonlyArray<[string, number | null | undefined]>, step: number, at: Date): MetricPoint[] {
  return figures.flatMap(([key, value]) =>
    typeof value === 'number' && Number.isFinite(value) ? [{ key, value, step, timestamp: at.getTime() }] : [],
  );
}
