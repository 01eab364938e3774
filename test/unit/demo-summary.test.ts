import { demoSummary, demoSummaryLines } from '../../cli/demo-summary';
import type { EvaluationSummary, RunSummary } from '../../workflows/definitions';

// Recorded from `npm run demo` (examples/demo.json, seed 1), trimmed to what the summary reads.
const run: RunSummary = {
  runId: 'demo-20261206-084014',
  name: 'demo',
  simulated: true,
  stepsCompleted: 12,
  policyVersion: 'demo-20261206-084014-model_c78ff887-step-11',
  baseSuccessStart: 0.046875,
  baseSuccessEnd: 0.46875,
  rewardStart: 0.047,
  rewardStartStdErr: 0.019,
  rewardEnd: 0.469,
  rewardEndStdErr: 0.044,
  logprobMismatch: 9.88e-9,
  mismatchByStaleness: {},
  deadGroups: 61,
  rescuedGroups: 53,
  rescueRollouts: 488,
  liveGroupFraction: 0.896,
  siblings: {},
  evaluations: [],
  baseEvalEnd: 0.6015625,
  rank1EvalEnd: 0.7578125,
};

function evaluation(afterSteps: number, basePassed: number, rank1Passed: number): EvaluationSummary {
  const arm = (passed: number) => ({ rollouts: 256, successRate: passed / 256, byKind: {} });
  return {
    afterSteps,
    policyVersion: afterSteps === 0 ? 'sim-policy-base' : run.policyVersion,
    profileVersion: afterSteps === 0 ? 1 : 2,
    tasks: 32,
    rolloutsPerTask: 8,
    base: arm(basePassed),
    rank1: arm(rank1Passed),
    rank1Routes: { lookup: 'ec-schema', api_call: 'ec-docs-injected', aggregate: 'ar-format', multi_step: 'ps-recipe' },
  };
}

const where = {
  seconds: 113.4,
  heldOut: true,
  reportFile: '.data/reports/demo-20261206-084014/index.html',
  temporalUi: 'http://127.0.0.1:8233/namespaces/default/workflows/demo-20261206-084014',
  viewer: 'http://127.0.0.1:8240/runs/demo-20261206-084014',
};

test('a run whose base-harness success rose: start -> end on held-out tasks, the 95% interval, dead, rescued, Rank-1', () => {
  const summary = demoSummary({ run, evalStart: evaluation(0, 14, 69), evalEnd: evaluation(12, 154, 194), ...where });
  const text = demoSummaryLines(summary).join('\n');
  expect(text).toContain('Demo summary [SIMULATED: sim policy, sim environment, sim trainer]');
  expect(text).toContain('demo-20261206-084014: 12 steps, 1m 53s in all');
  expect(text).toContain(
    'base-harness success    5.5% before training -> 60.2% after 12 steps (32 held-out tasks x 8 rollouts, 256 before and 256 after)',
  );
  // Newcombe's interval of 154/256 - 14/256.
  expect(text).toContain(
    'change                  +54.7 points, 95% interval [+47.7, +60.9]: a rise beyond noise (the interval excludes 0)',
  );
  expect(text).toContain('dead groups             61 (groups whose every base-harness rollout failed');
  expect(text).toContain('rescued                 53 of them, by sibling harnesses (488 rescue rollouts)');
  expect(text).toContain('Rank-1 routing (eval)   27.0% before training -> 75.8% after');
  expect(summary.baseChange).toMatchObject({ excludesZero: true });
});

test('a change whose interval includes 0 is reported as within noise, not as a rise', () => {
  const text = demoSummaryLines(demoSummary({ run, evalStart: evaluation(0, 100, 120), evalEnd: evaluation(12, 110, 150), ...where })).join(
    '\n',
  );
  expect(text).toContain(
    '+3.9 points, 95% interval [-4.6, +12.3]: within noise (the interval includes 0); this one run cannot tell the change from chance',
  );
  expect(text).not.toContain('beyond noise');
});

test('a fall beyond noise says so', () => {
  const text = demoSummaryLines(demoSummary({ run, evalStart: evaluation(0, 150, 150), evalEnd: evaluation(12, 100, 100), ...where })).join(
    '\n',
  );
  expect(text).toContain('-19.5 points, 95% interval [-27.8, -10.9]: a fall beyond noise');
});

test('without evaluations there is no interval, and the training batches are named as such', () => {
  const summary = demoSummary({ run, evalStart: null, evalEnd: null, ...where });
  expect(summary.baseChange).toBeNull();
  const text = demoSummaryLines(summary).join('\n');
  expect(text).toContain('no evaluation on the eval split (eval.enabled is false): no interval');
  expect(text).toContain('in training batches   4.7% at the first step -> 46.9% at the last');
  expect(text).not.toContain('Rank-1 routing (eval)');
  const noStart = demoSummaryLines(demoSummary({ run, evalStart: null, evalEnd: evaluation(12, 154, 194), ...where })).join('\n');
  expect(noStart).toContain('60.2% after 12 steps on the eval split, but no evaluation before training: no interval');
});

test('the addresses are given as what to open after `harness-s dev`, never as live; the report file stays', () => {
  const lines = demoSummaryLines(demoSummary({ run, evalStart: evaluation(0, 14, 69), evalEnd: evaluation(12, 154, 194), ...where }));
  const stopped = lines.indexOf('The stack has stopped; the run stays stored. To look at it again:');
  expect(stopped).toBeGreaterThan(0);
  const after = lines.slice(stopped + 1).join('\n');
  expect(after).toContain('its report, a file:      .data/reports/demo-20261206-084014/index.html');
  expect(after).toContain(
    '`npx harness-s dev`, then the Temporal Web UI: http://127.0.0.1:8233/namespaces/default/workflows/demo-20261206-084014',
  );
  expect(after).toContain('`npx harness-s ui` alone): http://127.0.0.1:8240/runs/demo-20261206-084014');
  // No address before that point: nothing printed at the end looks live.
  expect(lines.slice(0, stopped).join('\n')).not.toMatch(/https?:\/\//);
});

test('a run on real engines is not labelled SIMULATED', () => {
  const text = demoSummaryLines(
    demoSummary({ run: { ...run, simulated: false }, evalStart: null, evalEnd: null, ...where, viewer: null }),
  ).join('\n');
  expect(text).not.toContain('SIMULATED');
  expect(text).not.toContain('trajectory viewer');
});
