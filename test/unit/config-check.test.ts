/**
 * `harness-s config check`: every example passes it, mixed worlds are warned
 * about by both endpoints, an enum typo gets its likely value, and a missing
 * file is said plainly. In process (cli/config-check.ts), and once through
 * the CLI for its output and exit codes.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { checkConfigFile, configCheckText, type ConfigCheckResult } from '../../cli/config-check';

const ROOT = path.resolve(__dirname, '../..');
const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-config-check-'));

/** Checks a config written to a temporary file (`name` picks the file). */
function check(content: unknown, name = 'config.json', options: { kind?: 'run' | 'evolution' } = {}): ConfigCheckResult {
  const file = path.join(dir, name);
  writeFileSync(file, JSON.stringify(content));
  return checkConfigFile(file, { cwd: ROOT, ...options });
}

const EXAMPLES = readdirSync(path.join(ROOT, 'examples'))
  .filter((f) => f.endsWith('.json') && !f.endsWith('.schema.json'))
  .map((f) => `examples/${f}`);

describe('the examples', () => {
  test('there are run and evolution configs among them', () => {
    expect(EXAMPLES).toEqual(expect.arrayContaining(['examples/sim-quickstart.json', 'examples/dbbench.json', 'examples/evolve-sim.json']));
  });

  test.each(EXAMPLES)('%s passes `config check`, with no warning', (file) => {
    const result = checkConfigFile(file, { cwd: ROOT });
    expect(result.errors).toEqual([]);
    expect(result.valid).toBe(true);
    expect(result.warnings).toEqual([]);
    expect(result.kind).toBe(file === 'examples/evolve-sim.json' ? 'evolution' : 'run');
  });

  test.each(EXAMPLES)('%s holds no secret and points editors at its schema', (file) => {
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    expect(text).not.toMatch(/"apiKey"\s*:/);
    expect(text).not.toMatch(/[a-z]+:\/\/[^/"\s:@]+:[^/"\s@]+@/i); // user:password@ in a URL
    expect(JSON.parse(text).$schema).toBe(file.includes('evolve') ? './evolution-config.schema.json' : './run-config.schema.json');
  });

  test("every host an example names is the machine's own or a docker compose service, at a port the service listens on", () => {
    const compose = parse(readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8')) as {
      services: Record<string, { expose?: string[]; ports?: Array<{ target: number }> }>;
    };
    const listens = (service: string) => {
      const s = compose.services[service];
      return s ? [...(s.expose ?? []).map(Number), ...(s.ports ?? []).map((p) => Number(p.target))] : [];
    };
    const named: string[] = [];
    for (const file of EXAMPLES) {
      for (const endpoint of checkConfigFile(file, { cwd: ROOT }).endpoints) {
        if (!/^https?:\/\//.test(endpoint.address)) continue;
        const url = new URL(endpoint.address);
        if (['127.0.0.1', 'localhost'].includes(url.hostname)) continue;
        named.push(
          `${file} ${endpoint.path}: ${url.hostname}:${url.port} ${listens(url.hostname).includes(Number(url.port)) ? 'ok' : 'is no compose service port'}`,
        );
      }
    }
    expect(named.filter((line) => !line.endsWith(' ok'))).toEqual([]);
    // swe, appworld and dbbench are the compose examples: the policy on vllm, the trainer on skyrl.
    expect(named.filter((line) => line.startsWith('examples/dbbench.json'))).toEqual([
      'examples/dbbench.json policy.baseUrl: vllm:8000 ok',
      'examples/dbbench.json trainer.baseUrl: skyrl:8100 ok',
    ]);
  });
});

describe('mixed worlds', () => {
  test('a Qwen3-8B policy on vLLM with no trainer is warned about: the SIMULATED trainer would train it; the warning names both endpoints', () => {
    const result = check({ config: { env: { kind: 'charset' }, policy: { baseUrl: 'http://vllm:8000/v1', model: 'Qwen/Qwen3-8B' } } });
    expect(result.valid).toBe(true);
    expect(result.warnings).toHaveLength(1);
    const [warning] = result.warnings;
    expect(warning.path).toBe('trainer.baseUrl');
    expect(warning.message).toContain('http://vllm:8000/v1 (model Qwen/Qwen3-8B)');
    expect(warning.message).toContain('the SIMULATED sim cluster, http://127.0.0.1:8765 (trainer.baseUrl not set');
    expect(result.endpoints.map((e) => [e.role, e.address, e.simulated])).toEqual([
      ['policy', 'http://vllm:8000/v1', false],
      ['trainer', 'http://127.0.0.1:8765', true],
      ['env', 'in the workers', false],
    ]);
  });

  test('the reverse, a real trainer with the SIMULATED policy, is warned about by both endpoints, and so is its learning rate', () => {
    const result = check({ config: { trainer: { baseUrl: 'http://skyrl:8100' } } });
    const byPath = Object.fromEntries(result.warnings.map((w) => [w.path, w.message]));
    expect(Object.keys(byPath)).toEqual(['policy.baseUrl', 'trainer.adam.learningRate']);
    expect(byPath['policy.baseUrl']).toMatch(
      /trainer is a real endpoint, http:\/\/skyrl:8100, but the policy is the SIMULATED sim cluster, http:\/\/127\.0\.0\.1:8765\/v1/,
    );
    expect(byPath['trainer.adam.learningRate']).toMatch(
      /^is 0\.05 \(not set: the default\), the learning rate tuned for the SIMULATED trainer/,
    );
  });

  test("a real trainer at the simulator's learning rate is warned about; at a real model's, or with the sim trainer, it is not", () => {
    const real = { policy: { baseUrl: 'http://vllm:8000/v1', model: 'Qwen/Qwen3-8B' }, env: { kind: 'charset' } };
    const at = (learningRate?: number) =>
      check({ config: { ...real, trainer: { baseUrl: 'http://skyrl:8100', ...(learningRate ? { adam: { learningRate } } : {}) } } })
        .warnings;
    expect(at()).toEqual([
      expect.objectContaining({ path: 'trainer.adam.learningRate', message: expect.stringContaining('http://skyrl:8100') }),
    ]);
    expect(at(0.05)[0].message).toMatch(/^is 0\.05, the learning rate/);
    expect(at(1e-5)).toEqual([]);
    expect(check({ config: { trainer: { adam: { learningRate: 0.05 } } } }).warnings).toEqual([]);
  });

  test('the sim env with a real policy, and a real env with the SIMULATED policy, are warned about', () => {
    const simEnv = check({
      config: {
        policy: { baseUrl: 'http://vllm:8000/v1', model: 'Qwen/Qwen3-8B' },
        trainer: { baseUrl: 'http://skyrl:8100', adam: { learningRate: 1e-5 } },
      },
    });
    expect(simEnv.warnings.map((w) => w.path)).toEqual(['env.kind']);
    const realEnv = check({ config: { env: { kind: 'charset' } } });
    expect(realEnv.warnings.map((w) => w.path)).toEqual(['policy.baseUrl']);
    expect(realEnv.warnings[0].message).toContain("env 'charset' is a real env, but policy is the SIMULATED sim cluster's policy");
  });

  test("an evolution's executor is checked against its env too", () => {
    const result = check(
      { config: { env: { kind: 'charset' }, proposers: [{ baseUrl: 'http://llm:8000/v1', model: 'writer' }] } },
      'evolve.json',
      {
        kind: 'evolution',
      },
    );
    expect(result.valid).toBe(true);
    expect(result.warnings.map((w) => w.path)).toEqual(['executor.baseUrl']);
    expect(result.endpoints.map((e) => e.role)).toEqual(['executor', 'proposer', 'env']);
  });
});

describe('errors', () => {
  test('an enum value that is a typo gets the value it likely meant; one that is no typo gets the list alone', () => {
    const result = check({
      config: {
        router: { strategy: 'vot' },
        checkpoint: { onLoss: 'pase' },
        sampling: { refill: 'sometimes' },
        env: { kind: 'dbbnech', data: 'x' },
      },
    });
    expect(result.valid).toBe(false);
    const byPath = Object.fromEntries(result.errors.map((e) => [e.path, e.message]));
    expect(byPath['router.strategy']).toMatch(/expected one of "validation"\|"vote"\|"random"\|"all"; did you mean "vote"\?$/);
    expect(byPath['checkpoint.onLoss']).toMatch(/did you mean "pause"\?$/);
    expect(byPath['env.kind']).toMatch(/did you mean "dbbench"\?$/);
    expect(byPath['sampling.refill']).not.toMatch(/did you mean/);
    const evolution = check({ config: { directions: ['procedural_skil'], rounds: 2 } }, 'evolve.json');
    expect(evolution.kind).toBe('evolution');
    expect(evolution.errors).toEqual([{ path: 'directions.0', message: expect.stringMatching(/did you mean "procedural_skill"\?$/) }]);
  });

  test('a config file that does not exist, and a data file a config names that does not exist, are "file not found"', () => {
    expect(checkConfigFile('examples/no-such-config.json', { cwd: ROOT })).toMatchObject({
      valid: false,
      kind: null,
      errors: [{ path: '(file)', message: 'file not found: examples/no-such-config.json' }],
    });
    const result = check({ config: { env: { kind: 'dbbench', data: 'data/dbbench/train.jsonl' } } });
    expect(result.errors).toEqual([
      { path: 'env.data', message: expect.stringMatching(/^file not found: data\/dbbench\/train\.jsonl \(/) },
    ]);
    const evolution = check({ config: { base: 'no/such/base.json', rounds: 1 } }, 'evolve.json');
    expect(evolution.errors).toEqual([{ path: 'base', message: expect.stringMatching(/^file not found: no\/such\/base\.json/) }]);
  });

  test('a file that is not JSON, or a run input with an unknown key, is invalid with the reason', () => {
    writeFileSync(path.join(dir, 'broken.json'), '{"config": ');
    expect(checkConfigFile(path.join(dir, 'broken.json')).errors[0].message).toMatch(/^cannot read it as JSON/);
    expect(check({ config: {}, cfg: {} }).errors).toEqual([
      { path: '(root)', message: 'cfg: unknown; known here: config, resume, recover, fork' },
    ]);
  });
});

describe('the command', () => {
  const run = (...args: string[]) =>
    promisify(execFile)(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['cli/main.ts', 'config', 'check', ...args], { cwd: ROOT }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
    );

  test('prints the endpoints and the warnings and exits 0 for a valid config; exits 2 for an invalid one, also with --json', async () => {
    const mixed = path.join(dir, 'mixed.json');
    writeFileSync(
      mixed,
      JSON.stringify({ config: { env: { kind: 'charset' }, policy: { baseUrl: 'http://vllm:8000/v1', model: 'Qwen/Qwen3-8B' } } }),
    );
    const [valid, json] = await Promise.all([run(mixed), run('no-such.json', '--json')]);
    expect(valid.code).toBe(0);
    expect(valid.stdout).toMatch(/valid \(charset, 20 steps, B=16, G=8\)/);
    expect(valid.stdout).toMatch(/^ {2}policy +http:\/\/vllm:8000\/v1 +\(model Qwen\/Qwen3-8B\)$/m);
    expect(valid.stdout).toMatch(/^ {2}trainer +http:\/\/127\.0\.0\.1:8765 +\(SIMULATED;/m);
    expect(valid.stdout).toMatch(/^warning: trainer\.baseUrl: mixed worlds:/m);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({
      valid: false,
      errors: [{ message: 'file not found: no-such.json' }],
      warnings: [],
      endpoints: [],
    });
  }, 60_000);

  test('says a missing file plainly, and lists every bad field by its path', () => {
    expect(configCheckText(checkConfigFile('no-such.json'))).toEqual({ out: '', err: 'file not found: no-such.json' });
    const typo = check({ config: { stepz: 3, router: { strategy: 'vot' } } }, 'typo.json');
    expect(configCheckText(typo).err).toBe(
      `${typo.file} is invalid (as a run config):\n  - router.strategy: Invalid option: expected one of "validation"|"vote"|"random"|"all"; did you mean "vote"?\n  - stepz: unknown; did you mean steps?`,
    );
  });
});
