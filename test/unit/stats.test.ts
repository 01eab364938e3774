import { linearTrend, pairedDifference, rateDifference, rateStdErr } from '../../core/stats';
import { mulberry32 } from '../../core/random';

test('a paired difference over seeds: mean and a Student-t 95% interval (t(0.975, 4) = 2.776)', () => {
  const a = [0.5, 0.6, 0.55, 0.7, 0.65];
  const b = [0.4, 0.55, 0.5, 0.6, 0.6];
  const d = [0.1, 0.05, 0.05, 0.1, 0.05];
  const mean = d.reduce((s, x) => s + x) / 5;
  const sd = Math.sqrt(d.reduce((s, x) => s + (x - mean) ** 2, 0) / 4);
  const r = pairedDifference(a, b);
  expect(r.n).toBe(5);
  expect(r.mean).toBeCloseTo(0.07, 12);
  expect(r.hi - r.mean).toBeCloseTo(2.7764451 * (sd / Math.sqrt(5)), 6);
  expect(r.excludesZero).toBe(true);
});

test('a difference that changes sign across seeds has an interval around 0', () => {
  const r = pairedDifference([0.5, 0.4, 0.6], [0.45, 0.5, 0.55]);
  expect(r.lo).toBeLessThan(0);
  expect(r.hi).toBeGreaterThan(0);
  expect(r.excludesZero).toBe(false);
});

test('one seed gives a difference but no interval; unpaired lengths are refused', () => {
  expect(pairedDifference([0.7], [0.5])).toMatchObject({
    n: 1,
    lo: expect.closeTo(0.2, 12),
    hi: expect.closeTo(0.2, 12),
    excludesZero: false,
  });
  expect(() => pairedDifference([1, 2], [1])).toThrow('paired difference of 2 and 1 values');
});

test("a success rate's standard error is binomial", () => {
  expect(rateStdErr(0.25, 300)).toBeCloseTo(Math.sqrt((0.25 * 0.75) / 300), 12);
  expect(rateStdErr(0.5, 0)).toBe(0);
});

test('a linear trend: the least-squares slope, its standard error from the residuals, and t', () => {
  // x = 0..4, y = 1 3 2 5 4: slope 8/10, residuals -0.4 0.8 -1 1.2 -0.6 (sum of squares 3.6), se = sqrt(3.6 / 3 / 10).
  const trend = linearTrend([1, 3, 2, 5, 4]);
  expect(trend.slope).toBeCloseTo(0.8, 12);
  expect(trend.stdErr).toBeCloseTo(Math.sqrt(0.12), 12);
  expect(trend.t).toBeCloseTo(0.8 / Math.sqrt(0.12), 12);
  expect(linearTrend([2, 2, 2]).t).toBe(0);
  expect(linearTrend([0, 1, 2]).t).toBe(Infinity);
  expect(() => linearTrend([1, 2])).toThrow('a trend needs at least 3 values, got 2');
});

test('with no trend, t over 20 steps exceeds 3 about as often as Student-t(18) says (0.4%)', () => {
  const random = mulberry32(11);
  const draws = 20_000;
  let over = 0;
  for (let i = 0; i < draws; i++) {
    if (linearTrend(Array.from({ length: 20 }, () => random())).t > 3) over += 1;
  }
  // P(t18 > 3) = 0.00384; 20000 draws give 77 ± 9 (binomial).
  expect(over / draws).toBeGreaterThan(0.0025);
  expect(over / draws).toBeLessThan(0.0055);
});

test("the difference of two success rates has Newcombe's hybrid score interval (his Table II examples)", () => {
  // 56/70 - 48/80: 0.2000, method 10 gives [0.0524, 0.3339]; 0/10 - 0/10: [-0.2775, +0.2775].
  expect(rateDifference(48, 80, 56, 70)).toMatchObject({
    difference: expect.closeTo(0.2, 12),
    lo: expect.closeTo(0.0524, 4),
    hi: expect.closeTo(0.3339, 4),
    excludesZero: true,
  });
  expect(rateDifference(0, 10, 0, 10)).toMatchObject({
    lo: expect.closeTo(-0.2775, 4),
    hi: expect.closeTo(0.2775, 4),
    excludesZero: false,
  });
  expect(rateDifference(40, 100, 30, 100).hi).toBeLessThan(0.1);
  expect(() => rateDifference(5, 0, 1, 2)).toThrow('A is 5 of 0 trials');
});
