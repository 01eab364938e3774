import { parseRunConfig, parseStoredRunConfig, RunConfigError, runConfigJsonSchema } from '../../core/config';
import { runInputProblem } from '../../core/run-input';
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

test('the DBBench example is a valid workflow input for a vLLM endpoint and a Tinker-compatible trainer, on the shipped data, with no password', () => {
  const config = parseRunConfig(dbbench.config);
  expect(config.env).toEqual(expect.objectContaining({ kind: 'dbbench', scoring: 'exact', data: 'data/dbbench/dev.jsonl' }));
  expect(config.env).not.toHaveProperty('mysqlUrl');
  expect([config.policy.baseUrl, config.trainer.baseUrl]).toEqual(['http://vllm:8000/v1', 'http://skyrl:8100']);
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
  expect(Object.keys(schema.properties)).toEqual(
    expect.arrayContaining(['env', 'policy', 'trainer', 'rollout', 'rescue', 'router', 'steps', 'seed']),
  );
});

test('the vote strategy needs at least one voter, each with an absolute URL and a model', () => {
  expect(() => parseRunConfig({ router: { strategy: 'vote' } })).toThrow(/router\.voters: the 'vote' strategy needs at least one voter/);
  expect(() => parseRunConfig({ router: { strategy: 'vote', voters: [{ baseUrl: 'localhost:8000', model: '' }] } })).toThrow(
    /router\.voters\.0\.baseUrl: must be an absolute http\(s\) URL[\s\S]*router\.voters\.0\.model/,
  );
  const config = parseRunConfig({ router: { strategy: 'vote', voters: [{ baseUrl: 'http://127.0.0.1:8000/v1', model: 'judge' }] } });
  expect(config.router.voters[0]).toEqual({ baseUrl: 'http://127.0.0.1:8000/v1', model: 'judge', timeoutSeconds: 30 });
});

test('an unknown router strategy is refused with the ones there are', () => {
  expect(() => parseRunConfig({ router: { strategy: 'oracle' } })).toThrow(/router\.strategy: .*"validation"\|"vote"\|"random"\|"all"/);
});

test('an endpoint key named by apiKeyEnv is read from the worker environment; a missing variable is named in the error', () => {
  const config = parseRunConfig({ trainer: { apiKeyEnv: 'HARNESS_S_TEST_TINKER_API_KEY' } });
  process.env.HARNESS_S_TEST_TINKER_API_KEY = 'tml-secret';
  try {
    expect(apiKeyOf(config.trainer, 'trainer')).toBe('tml-secret');
  } finally {
    delete process.env.HARNESS_S_TEST_TINKER_API_KEY;
  }
  expect(() => apiKeyOf(config.trainer, 'trainer')).toThrow(
    "trainer.apiKeyEnv names $HARNESS_S_TEST_TINKER_API_KEY, which is not set in this worker's environment",
  );
  expect(apiKeyOf(parseRunConfig({}).trainer, 'trainer')).toBe('EMPTY');
  expect(() => parseRunConfig({ policy: { apiKeyEnv: 'not a name' } })).toThrow(/policy\.apiKeyEnv/);
});

test('a typo anywhere in a config is refused, naming its path and the nearest known key', () => {
  const problems = (raw: unknown) => {
    try {
      parseRunConfig(raw);
    } catch (err) {
      return { message: (err as RunConfigError).message, paths: (err as RunConfigError).paths };
    }
    throw new Error('accepted');
  };
  const typos = problems({
    stepz: 40,
    rollout: { groupsize: 4 },
    env: { kind: 'sim', wrld: 'w.json' },
    router: { voters: [{ baseUrl: 'http://127.0.0.1:1/v1', model: 'm', timeout: 3 }] },
  });
  expect(typos.message).toContain('stepz: unknown; did you mean steps?');
  expect(typos.message).toContain('rollout.groupsize: unknown; did you mean groupSize?');
  expect(typos.message).toContain('env.wrld: unknown; did you mean world?');
  expect(typos.message).toMatch(/router\.voters\.0\.timeout: unknown; did you mean timeoutSeconds\?/);
  expect(typos.paths).toEqual(expect.arrayContaining(['stepz', 'rollout.groupsize', 'env.wrld', 'router.voters.0.timeout']));
  expect(problems({ cfg: {} }).message).toMatch(/cfg: unknown; known here: name, env, /);
});

test('a literal API key is refused with what to do instead; the old "EMPTY" placeholder is no key and is dropped', () => {
  expect(() => parseRunConfig({ policy: { apiKey: 'sk-live-123' } })).toThrow(
    /policy\.apiKey: a literal API key is not accepted.*"policy": \{"apiKeyEnv": "VLLM_API_KEY"\}/,
  );
  expect(() =>
    parseRunConfig({ router: { strategy: 'vote', voters: [{ baseUrl: 'http://127.0.0.1:1/v1', model: 'm', apiKey: 'sk-x' }] } }),
  ).toThrow(/router\.voters\.0\.apiKey: a literal API key/);
  const config = parseRunConfig({ policy: { apiKey: 'EMPTY' }, trainer: { apiKey: 'EMPTY' } });
  expect(config.policy).not.toHaveProperty('apiKey');
  expect(JSON.stringify(config)).not.toContain('apiKey"');
});

test('a config stored by an older version still loads: its placeholder keys and retired keys are dropped', () => {
  const stored = {
    ...parseRunConfig({ steps: 7 }),
    policy: { ...parseRunConfig({}).policy, apiKey: 'EMPTY' },
    trainer: { ...parseRunConfig({}).trainer, apiKey: 'old-literal' },
    retired: 1,
  };
  const config = parseStoredRunConfig(stored, 'stored config of run-x');
  expect(config.steps).toBe(7);
  expect(JSON.stringify(config)).not.toMatch(/apiKey"|old-literal|retired/);
  expect(() => parseStoredRunConfig({ steps: 0 }, 'stored config of run-x')).toThrow(/stored config of run-x is invalid:\n {2}- steps/);
});

test('a workflow input must be {"config": {...}}: a mistyped wrapper is named', () => {
  expect(runInputProblem({ config: {} })).toBeNull();
  // An example file passed whole (its $schema pointer along) is a valid input.
  expect(runInputProblem({ $schema: './run-config.schema.json', config: {} })).toBeNull();
  expect(runInputProblem({ cfg: {} })).toBe('cfg: unknown; known here: config, resume, recover, fork');
  expect(runInputProblem({ config: {}, fork: { runId: 'r' } })).toMatch(/^fork: must be {"runId"/);
  expect(runInputProblem({ config: {}, fork: { runId: 'r', step: 3 } })).toMatch(/^fork: needs resume/);
  expect(runInputProblem({ conf: {} })).toBe('conf: unknown; did you mean config?');
  expect(runInputProblem({})).toMatch(/^config: missing/);
  expect(runInputProblem('x')).toMatch(/must be a JSON object/);
});

test('a frozen pool and a harness folder cannot both be named', () => {
  expect(() => parseRunConfig({ env: { kind: 'sim', pool: '0123456789abcdef', harnessDir: 'my-harnesses' } })).toThrow(
    /env\.pool: name either a frozen pool \(pool\) or a folder of harness files \(harnessDir\), not both/,
  );
  expect(() => parseRunConfig({ env: { kind: 'charset', pool: '0123456789abcdef', harnessDir: 'my-harnesses' } })).toThrow(/env\.pool:/);
  expect(parseRunConfig({ env: { kind: 'dbbench', data: 'tasks.jsonl', pool: '0123456789abcdef' } }).env).toMatchObject({
    pool: '0123456789abcdef',
  });
});

test("env.pool must be a frozen pool's hash, and the message says where hashes come from", () => {
  expect(() => parseRunConfig({ env: { kind: 'sim', pool: 'my-pool' } })).toThrow(
    /env\.pool: a frozen pool's hash: 16 lower-case hex characters, as printed by `harness-s pool evolve`/,
  );
});

test('apiKeyEnv reads only names that look like keys, or those the operator lists, so a config cannot send another variable out', () => {
  const env = { DATABASE_URL: 'postgresql://harness_s:pw@db/harness_s', VLLM_API_KEY: 'sk-1', HF_TOKEN: 'hf-1', JUDGE_SECRET: 'j-1' };
  expect(apiKeyOf({ apiKeyEnv: 'VLLM_API_KEY' }, 'policy', env)).toBe('sk-1');
  expect(apiKeyOf({ apiKeyEnv: 'HF_TOKEN' }, 'trainer', env)).toBe('hf-1');
  expect(() => apiKeyOf({ apiKeyEnv: 'DATABASE_URL' }, 'policy', env)).toThrow(
    /policy\.apiKeyEnv names \$DATABASE_URL, which is not read as an API key: only variables named \*_API_KEY or \*_TOKEN are.*HARNESS_S_KEY_ENV_ALLOW/,
  );
  expect(() => apiKeyOf({ apiKeyEnv: 'JUDGE_SECRET' }, 'router.voters.0', env)).toThrow(
    /router\.voters\.0\.apiKeyEnv names \$JUDGE_SECRET/,
  );
  // A name that only contains the suffix is not a key's name.
  expect(() => apiKeyOf({ apiKeyEnv: 'API_KEY_PATH' }, 'policy', { ...env, API_KEY_PATH: '/x' })).toThrow(/not read as an API key/);
  const operator = { ...env, HARNESS_S_KEY_ENV_ALLOW: ' JUDGE_SECRET , OTHER' };
  expect(apiKeyOf({ apiKeyEnv: 'JUDGE_SECRET' }, 'router.voters.0', operator)).toBe('j-1');
  expect(() => apiKeyOf({ apiKeyEnv: 'DATABASE_URL' }, 'policy', operator)).toThrow(/not read as an API key/);
});
