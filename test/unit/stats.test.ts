import { pairedDifference, rateStdErr } from '../../core/stats';

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
  expect(pairedDifference([0.7], [0.5])).toMatchObject({ n: 1, lo: expect.closeTo(0.2, 12), hi: expect.closeTo(0.2, 12), excludesZero: false });
  expect(() => pairedDifference([1, 2], [1])).toThrow('paired difference of 2 and 1 values');
});

test("a success rate's standard error is binomial", () => {
  expect(rateStdErr(0.25, 300)).toBeCloseTo(Math.sqrt(0.25 * 0.75 / 300), 12);
  expect(rateStdErr(0.5, 0)).toBe(0);
});
