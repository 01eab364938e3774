import { computeGrpoAdvantages, GRPO_EPSILON } from '../../core/rl/grpo';
import { allFailed } from '../../core/rl/rescue';

describe('computeGrpoAdvantages (as verl computes GRPO)', () => {
  test('a group whose rewards are all equal has zero advantage', () => {
    expect(computeGrpoAdvantages([0, 0, 0, 0])).toEqual([0, 0, 0, 0]);
    expect(computeGrpoAdvantages([1, 1, 1])).toEqual([0, 0, 0]);
    expect(computeGrpoAdvantages([0, 0, 0], false)).toEqual([0, 0, 0]);
  });

  test('advantages are centred on the group mean and divided by the unbiased std plus epsilon', () => {
    const rewards = [1, 0, 0, 0];
    const mean = 0.25;
    const unbiasedStd = Math.sqrt((0.75 ** 2 + 3 * 0.25 ** 2) / 3);
    const advantages = computeGrpoAdvantages(rewards);
    rewards.forEach((r, i) => expect(advantages[i]).toBeCloseTo((r - mean) / (unbiasedStd + GRPO_EPSILON), 10));
    // The biased (population) std would give a different value: the test tells them apart.
    const biasedStd = Math.sqrt((0.75 ** 2 + 3 * 0.25 ** 2) / 4);
    expect(advantages[0]).not.toBeCloseTo(0.75 / biasedStd, 3);
  });

  test('Dr.GRPO (no std) only centres the rewards', () => {
    expect(computeGrpoAdvantages([1, 0, 0, 1], false)).toEqual([0.5, -0.5, -0.5, 0.5]);
  });

  test('a group of one gets the raw reward, as verl sets mean 0 and std 1 for it', () => {
    expect(computeGrpoAdvantages([1])[0]).toBeCloseTo(1 / (1 + GRPO_EPSILON), 12);
    expect(computeGrpoAdvantages([0])).toEqual([0]);
    expect(computeGrpoAdvantages([1], false)).toEqual([1]);
  });

  test('an empty group has no advantages', () => {
    expect(computeGrpoAdvantages([])).toEqual([]);
  });

  test('a group is dead only when no rollout succeeded', () => {
    expect(allFailed([false, false])).toBe(true);
    expect(allFailed([false, true])).toBe(false);
    expect(allFailed([])).toBe(false);
  });
});
