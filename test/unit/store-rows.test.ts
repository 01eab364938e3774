import { parseRow, StoredProfileCells, StoredRowError, StoredStepSummary } from '../../core/store/rows';

const step = {
  step: 3,
  policyVersionBefore: 'p2',
  policyVersion: 'p3',
  profileVersion: 1,
  tasks: 4,
  baseRollouts: 16,
  rescueRollouts: 4,
  baseSuccessRate: 0.25,
  deadGroups: 1,
  rescuedGroups: 1,
  liveGroupFraction: 0.75,
  siblings: { ar: { lookup: { groupsChosen: 1, groupsRescued: 1, rollouts: 2, successes: 1 } } },
  datums: 12,
  trainerMetrics: { loss: 0.5 },
  durationSeconds: 2,
};

test('a step summary stored before newer fields existed reads with their defaults', () => {
  const parsed = parseRow(StoredStepSummary, step, 'steps row (run r, step 3): summary');
  expect(parsed).toMatchObject({ deadTaskIds: [], logprobMismatch: null, publishProbeMeanAbsDiff: null });
  expect(parsed).toMatchObject({ baseMeanReward: null, baseRewardStdErr: null });
});

test('a stored row that is not what this version reads is refused with where and what', () => {
  const broken = { ...step, baseSuccessRate: 'high', siblings: { ar: { lookup: { groupsChosen: 1 } } } };
  const refused = (() => {
    try {
      return parseRow(StoredStepSummary, broken, 'steps row (run r, step 3): summary');
    } catch (err) {
      return err;
    }
  })();
  expect(refused).toBeInstanceOf(StoredRowError);
  expect((refused as Error).message).toMatch(/^run store: steps row \(run r, step 3\): summary is not what this version reads:/);
  expect((refused as Error).message).toContain('baseSuccessRate');
  expect((refused as Error).message).toContain('siblings.ar.lookup.groupsRescued');
});

test('profile cells stored before the base harness and per-kind cells were kept read with null and none', () => {
  expect(parseRow(StoredProfileCells, { priorStrength: 2, cells: [] }, 'profiles row')).toEqual({
    priorStrength: 2,
    baseHarnessId: null,
    cells: [],
    kindCells: [],
  });
});

test('metrics a diverged trainer reported as NaN (stored as null) are left out, and the row still reads', () => {
  const stored = JSON.parse(
    JSON.stringify({
      ...step,
      trainerMetrics: { loss: Number.NaN, grad_norm: 1.5 },
      logprobMismatch: { tokens: 3, meanAbsDiff: Number.NaN, ratioMean: 1, ratioStd: 0, ratioMin: 1, ratioMax: 1 },
    }),
  );
  const parsed = parseRow(StoredStepSummary, stored, 'steps row');
  expect(parsed.trainerMetrics).toEqual({ grad_norm: 1.5 });
  expect(parsed.logprobMismatch).toBeNull();
});

test('per-kind profile cells stored before rescue evidence was kept per kind read with zeros', () => {
  const cell = { harnessId: 'ar', kind: 'lookup', attempts: 4, successes: 1, totalTurns: 9 };
  expect(parseRow(StoredProfileCells, { priorStrength: 2, cells: [], kindCells: [cell] }, 'profiles row').kindCells).toEqual([
    { ...cell, rescueAttempts: 0, rescueSuccesses: 0, rescueTurns: 0, rescueTokens: 0 },
  ]);
});
