import { probeMeanAbsDiff, probeSequence, PROBE_MAX_TOKENS } from '../../core/policy/adapter-probe';
import { policyVersionName } from '../../core/policy/publisher';
import { logprobMismatch } from '../../core/rl/logprob-mismatch';
import { meanAndStdErr } from '../../core/stats';

test('the log-prob mismatch counts only the model tokens, with the importance ratio exp(train - sample)', () => {
  const mismatch = logprobMismatch([
    { trainer: [-1, -2, -3], sampler: [-1.1, -2, -9], mask: [1, 1, 0] },
    { trainer: [-0.5], sampler: [-0.7], mask: [1] },
  ])!;
  expect(mismatch.tokens).toBe(3);
  expect(mismatch.meanAbsDiff).toBeCloseTo((0.1 + 0 + 0.2) / 3, 12);
  const ratios = [Math.exp(0.1), 1, Math.exp(0.2)];
  expect(mismatch.ratioMean).toBeCloseTo(ratios.reduce((a, b) => a + b) / 3, 12);
  expect(mismatch.ratioMin).toBe(1);
  expect(mismatch.ratioMax).toBeCloseTo(Math.exp(0.2), 12);
});

test('identical log-probs give no mismatch: ratio exactly 1 with no spread', () => {
  expect(logprobMismatch([{ trainer: [-1, -2], sampler: [-1, -2], mask: [1, 1] }])).toEqual({
    tokens: 2,
    meanAbsDiff: 0,
    ratioMean: 1,
    ratioStd: 0,
    ratioMin: 1,
    ratioMax: 1,
  });
});

test('there is no mismatch to report without model tokens', () => {
  expect(logprobMismatch([{ trainer: [-1], sampler: [-2], mask: [0] }])).toBeNull();
  expect(logprobMismatch([])).toBeNull();
});

test('the probe compares the model tokens of a trajectory, not its prompt or observations', () => {
  const probe = probeSequence({
    promptIds: [1, 2, 3],
    responseIds: [4, 5, 6, 7],
    responseMask: [1, 0, 1, 1],
    responseLogprobs: [0, 0, 0, 0],
  });
  expect(probe).toEqual({ tokens: [1, 2, 3, 4, 5, 6, 7], positions: [3, 5, 6] });
});

test('the probe is cut at its maximum length, keeping only positions inside it', () => {
  const promptIds = Array.from({ length: PROBE_MAX_TOKENS - 1 }, (_, i) => i);
  const probe = probeSequence({ promptIds, responseIds: [1, 2, 3], responseMask: [1, 1, 1], responseLogprobs: [0, 0, 0] });
  expect(probe.tokens).toHaveLength(PROBE_MAX_TOKENS);
  expect(probe.positions).toEqual([PROBE_MAX_TOKENS - 1]);
});

test("a served answer is compared with the trainer's at the probe positions; a missing log-prob never passes", () => {
  const probe = { tokens: [1, 2, 3, 4], positions: [2, 3], logprobs: [-1, -2] };
  expect(probeMeanAbsDiff(probe, [null, -5, -1.5, -2])).toBeCloseTo(0.25, 12);
  expect(probeMeanAbsDiff(probe, [null, -5, null, -2])).toBe(Infinity);
});

test('adapter names are unique to run, trainer model and step', () => {
  expect(policyVersionName('run-1', 'model_ab', 3)).toBe('run-1-model_ab-step-3');
});

test('mean and standard error: unbiased, zero error for a single value, nothing for none', () => {
  expect(meanAndStdErr([1, 0, 1, 0])).toEqual({ mean: 0.5, stdErr: Math.sqrt(1 / 3 / 4) });
  expect(meanAndStdErr([0.7])).toEqual({ mean: 0.7, stdErr: 0 });
  expect(meanAndStdErr([])).toEqual({ mean: 0, stdErr: 0 });
});
