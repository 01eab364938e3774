import { parseRunConfig } from '../../core/config';
import { evaluationMetricPoints, flattenConfig, metricKey, stepMetricPoints } from '../../core/tracking/figures';
import { trackerRegistration, trackingEndpointsFromEnv } from '../../core/tracking/registry';
import { trackersOf } from '../../core/tracking/tracker-configs';
import { evaluation, stepSummary } from './report-fixtures';

const at = new Date('2026-01-02T03:04:05.678Z');
const valueOf = (points: ReturnType<typeof stepMetricPoints>, key: string) => points.find((p) => p.key === key)?.value;

test('a config flattens to dot-keyed params, arrays by index and empty containers shown', () => {
  const params = flattenConfig({
    name: 'r',
    rollout: { groupSize: 8, concurrency: 4 },
    harnessPool: ['base', 'ec'],
    voters: [],
    env: { kind: 'sim', extra: {} },
    budget: undefined,
    note: null,
  });
  expect(params).toEqual([
    { key: 'env.extra', value: '{}' },
    { key: 'env.kind', value: 'sim' },
    { key: 'harnessPool.0', value: 'base' },
    { key: 'harnessPool.1', value: 'ec' },
    { key: 'name', value: 'r' },
    { key: 'note', value: 'null' },
    { key: 'rollout.concurrency', value: '4' },
    { key: 'rollout.groupSize', value: '8' },
    { key: 'voters', value: '[]' },
  ]);
});

test('a full run config flattens to one param per leaf, each key unique', () => {
  const params = flattenConfig(parseRunConfig({ tracking: { mlflow: { experiment: 'e' } } }));
  expect(new Set(params.map((p) => p.key)).size).toBe(params.length);
  expect(params).toContainEqual({ key: 'tracking.mlflow.experiment', value: 'e' });
  expect(params).toContainEqual({ key: 'rollout.groupSize', value: '8' });
});

test("a trainer's metric names become keys trackers accept", () => {
  expect(metricKey('loss:sum')).toBe('loss_sum');
  expect(metricKey('optim/step')).toBe('optim/step');
  expect(metricKey('grad norm (l2)')).toBe('grad norm _l2_');
});

test("a step's figures are metric points at its step, stamped with when it was recorded", () => {
  const points = stepMetricPoints(
    stepSummary(3, { deadGroups: 4, rescuedGroups: 1, failedGroups: [{ taskId: 't', role: 'base', reason: 'x' }], staleness: 1 }),
    at,
  );
  expect(points.every((p) => p.step === 3 && p.timestamp === at.getTime())).toBe(true);
  expect(valueOf(points, 'base_success')).toBeCloseTo(0.5);
  expect(valueOf(points, 'base_reward')).toBeCloseTo(0.45);
  expect(valueOf(points, 'dead_groups')).toBe(4);
  expect(valueOf(points, 'rescued_groups')).toBe(1);
  expect(valueOf(points, 'failed_groups')).toBe(1);
  expect(valueOf(points, 'live_share')).toBeCloseTo(0.8);
  expect(valueOf(points, 'rescue_rate')).toBe(0.25);
  expect(valueOf(points, 'trainer/loss_sum')).toBeCloseTo(-0.2);
  expect(valueOf(points, 'trainer/grad_norm')).toBeCloseTo(0.9);
  expect(valueOf(points, 'mismatch/mean_abs_diff')).toBeCloseTo(4e-7);
  expect(valueOf(points, 'seconds/rollout')).toBe(1);
  expect(valueOf(points, 'staleness')).toBe(1);
  expect(new Set(points.map((p) => p.key)).size).toBe(points.length);
});

test('a figure not measured is left out, not logged as zero', () => {
  const points = stepMetricPoints(
    stepSummary(0, { deadGroups: 0, rescuedGroups: 0, logprobMismatch: null, phaseSeconds: null, baseMeanReward: undefined }),
    at,
  );
  const keys = points.map((p) => p.key);
  expect(keys).not.toContain('rescue_rate');
  expect(keys).not.toContain('mismatch/mean_abs_diff');
  expect(keys).not.toContain('seconds/rollout');
  expect(keys).not.toContain('base_reward');
  expect(keys).not.toContain('staleness');
  expect(keys).toContain('base_success');
});

test("an evaluation's success rates are metric points at its afterSteps", () => {
  const points = evaluationMetricPoints(evaluation(4, 0.25, 0.5), at);
  expect(points.every((p) => p.step === 4 && p.timestamp === at.getTime())).toBe(true);
  expect(valueOf(points, 'eval/base_success')).toBe(0.25);
  expect(valueOf(points, 'eval/rank1_success')).toBe(0.5);
  expect(valueOf(points, 'eval/rank1_gain')).toBe(0.25);
  expect(valueOf(points, 'eval/base_success/lookup')).toBe(0.25);
});

test('the tracking section is optional, strict, and names the trackers it turns on', () => {
  expect(parseRunConfig({}).tracking).toBeUndefined();
  expect(trackersOf(parseRunConfig({}).tracking)).toEqual([]);
  expect(trackersOf(parseRunConfig({ tracking: { mlflow: {} } }).tracking)).toEqual(['mlflow']);
  expect(() => parseRunConfig({ tracking: { mlflow: { experimnet: 'x' } } })).toThrow(/tracking\.mlflow/);
  expect(() => parseRunConfig({ tracking: { wandb: {} } })).toThrow(/tracking/);
});

test("the worker reads each tracker's server from its environment variable, an empty one meaning none", () => {
  expect(trackerRegistration('mlflow').endpointEnv).toBe('MLFLOW_TRACKING_URI');
  expect(trackingEndpointsFromEnv({ MLFLOW_TRACKING_URI: 'http://127.0.0.1:5000' })).toEqual({ mlflow: 'http://127.0.0.1:5000' });
  expect(trackingEndpointsFromEnv({ MLFLOW_TRACKING_URI: '' })).toEqual({});
  expect(() => trackerRegistration('wandb')).toThrow(/no tracker 'wandb'.*mlflow/);
});
