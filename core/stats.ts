/**
 * Statistics: a mean with its standard error (step summaries), a linear
 * trend over a run's steps with its standard error, and for comparing runs a paired difference over seeds with its
 * Student-t confidence interval. Arms of a compare share their seed (same
 * tasks at every step, same eval split), so their figures pair by seed and
 * the seed-to-seed spread cancels out of the difference. Within one run,
 * success rates get Wilson's interval, and the difference of two rates
 * Newcombe's (the demo's start -> end).
 */
import tQuantile from '@stdlib/stats-base-dists-t-quantile';

export interface PairedDifference {
  /** Seeds in both arms. */
  n: number;
  mean: number;
  /** The confidence interval of the mean difference (equal to the mean when n < 2: no spread to go by). */
  lo: number;
  hi: number;
  /** The interval lies wholly above or below 0. */
  excludesZero: boolean;
}

export const CI_METHOD = 'paired t over seeds, 95%';

/** a - b, paired by index: mean and its 95% Student-t interval (df = n - 1). */
export function pairedDifference(a: readonly number[], b: readonly number[], level = 0.95): PairedDifference {
  if (a.length !== b.length) throw new Error(`paired difference of ${a.length} and ${b.length} values`);
  const d = a.map((x, i) => x - b[i]);
  const n = d.length;
  const { mean, stdErr } = meanAndStdErr(d);
  if (n < 2) return { n, mean, lo: mean, hi: mean, excludesZero: false };
  const half = tQuantile(1 - (1 - level) / 2, n - 1) * stdErr;
  return { n, mean, lo: mean - half, hi: mean + half, excludesZero: mean - half > 0 || mean + half < 0 };
}

/** Standard error of a success rate measured over `trials` independent trials (binomial). */
export function rateStdErr(rate: number, trials: number): number {
  return trials > 0 ? Math.sqrt((rate * (1 - rate)) / trials) : 0;
}

/** Mean and standard error of the mean (unbiased std / sqrt(n)); 0 and 0 for no values, error 0 for one. */
export function meanAndStdErr(values: readonly number[]): { mean: number; stdErr: number } {
  if (values.length === 0) return { mean: 0, stdErr: 0 };
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  if (values.length === 1) return { mean, stdErr: 0 };
  const variance = values.reduce((a, v) => a + (v - mean) ** 2, 0) / (values.length - 1);
  return { mean, stdErr: Math.sqrt(variance / values.length) };
}

export interface LinearTrend {
  /** Least-squares slope of the values against their index (per step). */
  slope: number;
  /** Its standard error from the residuals (df = n - 2): every source of step-to-step noise counts. */
  stdErr: number;
  /** slope / stdErr: Student-t with n - 2 degrees of freedom when there is no trend and the residuals are independent. */
  t: number;
}

/**
 * The ordinary least-squares trend of `values` over 0..n-1. Needs at least
 * three values (one degree of freedom for the residuals); a perfect fit has
 * stdErr 0 and t ±Infinity (0 when flat).
 */
export function linearTrend(values: readonly number[]): LinearTrend {
  const n = values.length;
  if (n < 3) throw new Error(`a trend needs at least 3 values, got ${n}`);
  const xMean = (n - 1) / 2;
  const yMean = values.reduce((a, b) => a + b, 0) / n;
  let sxx = 0;
  let sxy = 0;
  values.forEach((y, x) => {
    sxx += (x - xMean) ** 2;
    sxy += (x - xMean) * (y - yMean);
  });
  const slope = sxy / sxx;
  const residuals = values.reduce((a, y, x) => a + (y - yMean - slope * (x - xMean)) ** 2, 0);
  const stdErr = Math.sqrt(residuals / (n - 2) / sxx);
  const t = stdErr > 0 ? slope / stdErr : slope === 0 ? 0 : Math.sign(slope) * Infinity;
  return { slope, stdErr, t };
}

/** Wilson's 95% score interval of a success rate: `passed` of `trials` independent trials ([0, 0] for none). */
export function wilsonInterval(passed: number, trials: number, z = 1.959963984540054): { lo: number; hi: number } {
  if (trials === 0) return { lo: 0, hi: 0 };
  const p = passed / trials;
  const denominator = 1 + (z * z) / trials;
  const centre = (p + (z * z) / (2 * trials)) / denominator;
  const half = (z * Math.sqrt((p * (1 - p)) / trials + (z * z) / (4 * trials * trials))) / denominator;
  return { lo: Math.max(0, centre - half), hi: Math.min(1, centre + half) };
}

export interface RateDifference {
  /** rateB - rateA. */
  difference: number;
  /** Newcombe's 95% interval of the difference (hybrid score, from each rate's Wilson interval). */
  lo: number;
  hi: number;
  /** The interval lies wholly above or below 0. */
  excludesZero: boolean;
}

/**
 * The difference of two independent success rates, B - A (`passedB` of `trialsB`
 * minus `passedA` of `trialsA`), with Newcombe's hybrid score interval (his
 * method 10, 1998): every trial counted as independent.
 */
export function rateDifference(passedA: number, trialsA: number, passedB: number, trialsB: number): RateDifference {
  for (const [passed, trials, name] of [
    [passedA, trialsA, 'A'],
    [passedB, trialsB, 'B'],
  ] as const) {
    if (!Number.isInteger(trials) || trials < 1 || !Number.isInteger(passed) || passed < 0 || passed > trials) {
      throw new Error(`rate difference: ${name} is ${passed} of ${trials} trials; need whole numbers, 0 <= passed <= trials, trials >= 1`);
    }
  }
  const a = passedA / trialsA;
  const b = passedB / trialsB;
  const wa = wilsonInterval(passedA, trialsA);
  const wb = wilsonInterval(passedB, trialsB);
  const difference = b - a;
  const lo = difference - Math.sqrt((b - wb.lo) ** 2 + (wa.hi - a) ** 2);
  const hi = difference + Math.sqrt((wb.hi - b) ** 2 + (a - wa.lo) ** 2);
  return { difference, lo, hi, excludesZero: lo > 0 || hi < 0 };
}
