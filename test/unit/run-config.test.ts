import { parseRunConfig, RunConfigError, runConfigJsonSchema } from '../../core/config';
import { apiKeyOf } from '../../core/secrets';
import sample from '../../examples/sim-quickstart.json';
import dbbench from '../../examples/dbbench.json';

test('an empty config takes the embedded sim defaults', () => {
  const config = parseRunConfig({});
  expect(config.env.kind).toBe('sim');
  expect(config.rollout.groupSize).toBe(8);
  expect(config.policy.baseUrl).toBe('http://127.0.0.1:8765/v1');
});

test('the quick-start example is a valid workflow input', () => {
  expect(parseRunConfig(sample.config).steps).toBe(20);
});

test('the DBBench example is a valid workflow input for a vLLM endpoint and a Tinker-compatible trainer', () => {
  const config = parseRunConfig(dbbench.config);
  expect(config.env).toMatchObject({ kind: 'dbbench', scoring: 'exact' });
  expect(config.policy.inferenceServers).toHaveLength(2);
});

test('every bad field is named by its path', () => {
  let error: RunConfigError | undefined;
  try {
    parseRunConfig({ steps: 0, rollout: { groupSize: 'eight' }, policy: { baseUrl: 'not a url' }, env: { kind: 'mars' } });
  } catch (err) {
    error = err as RunConfigError;
  }
  expect(error).toBeInstanceOf(RunConfigError);
  expect(error!.paths).toEqual(expect.arrayContaining(['steps', 'rollout.groupSize', 'policy.baseUrl', 'env.kind']));
  expect(error!.message).toMatch(/steps:/);
  expect(error!.message).toMatch(/rollout\.groupSize:/);
});

test('k must divide G so the rescued group keeps size G', () => {
  expect(() => parseRunConfig({ rollout: { groupSize: 8 }, rescue: { k: 3 } })).toThrow(/rescue\.k: must divide rollout\.groupSize \(8\)/);
});

test('a group of one is refused: GRPO needs at least two rollouts to compare', () => {
  expect(() => parseRunConfig({ rollout: { groupSize: 1 } })).toThrow(/rollout\.groupSize/);
});

test('the exported JSON Schema describes the config for the UI', () => {
  const schema = runConfigJsonSchema() as { properties: Record<string, unknown> };
  expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(['env', 'policy', 'trainer', 'rollout', 'rescue', 'router', 'steps', 'seed']));
});

test('the vote strategy needs at least one voter, each with an absolute URL and a model', () => {
  expect(() => parseRunConfig({ router: { strategy: 'vote' } })).toThrow(/router\.voters: the 'vote' strategy needs at least one voter/);
  expect(() => parseRunConfig({ router: { strategy: 'vote', voters: [{ baseUrl: 'localhost:8000', model: '' }] } })).toThrow(
    /router\.voters\.0\.baseUrl: must be an absolute http\(s\) URL[\s\S]*router\.voters\.0\.model/,
  );
  const config = parseRunConfig({ router: { strategy: 'vote', voters: [{ baseUrl: 'http://127.0.0.1:8000/v1', model: 'judge' }] } });
  expect(config.router.voters[0]).toEqual({ baseUrl: 'http://127.0.0.1:8000/v1', model: 'judge', apiKey: 'EMPTY', timeoutSeconds: 30 });
});

test('an unknown router strategy is refused with the ones there are', () => {
  expect(() => parseRunConfig({ router: { strategy: 'oracle' } })).toThrow(/router\.strategy: .*"validation"\|"vote"\|"random"\|"all"/);
});

test('an endpoint key named by apiKeyEnv is read from the worker environment; a missing variable is named in the error', () => {
  const config = parseRunConfig({ trainer: { apiKeyEnv: 'HARNESS_S_TEST_TINKER_KEY' } });
  process.env.HARNESS_S_TEST_TINKER_KEY = 'tml-secret';
  try {
    expect(apiKeyOf(config.trainer, 'trainer')).toBe('tml-secret');
  } finally {
    delete process.env.HARNESS_S_TEST_TINKER_KEY;
  }
  expect(() => apiKeyOf(config.trainer, 'trainer')).toThrow("trainer.apiKeyEnv names $HARNESS_S_TEST_TINKER_KEY, which is not set in this worker's environment");
  expect(apiKeyOf(parseRunConfig({}).trainer, 'trainer')).toBe('EMPTY');
  expect(() => parseRunConfig({ policy: { apiKeyEnv: 'not a name' } })).toThrow(/policy\.apiKeyEnv/);
});
