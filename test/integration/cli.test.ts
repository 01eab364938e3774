/**
 * What users type: the `harness-s` CLI and the `temporal` CLI against a real
 * dev server, with the examples' JSON as the workflow input.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { findTemporalCli } from '../../infra/temporal-cli';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..', '..');
const env = { ...process.env, TEMPORAL_ADDRESS: TEST_TEMPORAL_ADDRESS, DATABASE_URL: TEST_DATABASE_URL, LOG_LEVEL: 'warn' };
let stack: TestStack;
let dir: string;

function harnessS(...args: string[]) {
  return run(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['cli/main.ts', ...args], { cwd: ROOT, env });
}

/** The quick-start example, pointed at this test's sim cluster and made small. */
function smallExample(): string {
  const example = JSON.parse(readFileSync(path.join(ROOT, 'examples', 'sim-quickstart.json'), 'utf8'));
  example.config = { ...example.config, ...stack.config({ steps: 1 }) };
  const file = path.join(dir, 'small.json');
  writeFileSync(file, JSON.stringify(example));
  return file;
}

beforeAll(async () => {
  stack = await startTestStack();
  dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-cli-'));
});
afterAll(async () => {
  await stack?.close();
});

test('a config with bad fields is refused before any workflow starts, naming each field', async () => {
  const file = path.join(dir, 'bad.json');
  writeFileSync(file, JSON.stringify({ config: { steps: -1, rollout: { groupSize: 6 }, rescue: { k: 4 } } }));
  const before = (await stack.client.workflow.count("WorkflowType = 'harnessSRun'")).count;
  const failure = await harnessS('run', 'start', '--config', file).then(
    () => null,
    (err) => err as { code: number; stderr: string },
  );
  expect(failure?.code).toBe(2);
  expect(failure?.stderr).toMatch(/steps: /);
  expect(failure?.stderr).toMatch(/rescue\.k: must divide rollout\.groupSize/);
  expect((await stack.client.workflow.count("WorkflowType = 'harnessSRun'")).count).toBe(before);
});

test('`run start --wait` runs to the end; `run status --json` and `run list --json` show it', async () => {
  const id = uniqueRunId('cli');
  const { stdout } = await harnessS('run', 'start', '--config', smallExample(), '--id', id, '--name', 'cli-run', '--wait');
  expect(stdout).toMatch(new RegExp(`^${id}$`, 'm'));
  expect(stdout).toMatch(/base-harness success/);
  const status = JSON.parse((await harnessS('run', 'status', id, '--json')).stdout);
  expect(status).toMatchObject({ runId: id, status: 'COMPLETED', summary: { stepsCompleted: 1, name: 'cli-run' } });
  const list = JSON.parse((await harnessS('run', 'list', '--json')).stdout) as Array<{ runId: string; name: string; step: number }>;
  expect(list.find((r) => r.runId === id)).toMatchObject({ name: 'cli-run', step: 1 });
});

test('a run started with `temporal workflow start --input` from the example file completes and lists with its search attributes', async () => {
  const cli = findTemporalCli();
  expect(cli).not.toBeNull();
  const id = uniqueRunId('temporal-cli');
  await run(cli!.path, [
    'workflow',
    'start',
    '--address',
    TEST_TEMPORAL_ADDRESS,
    '--type',
    'harnessSRun',
    '--task-queue',
    'harness-s-control',
    '--workflow-id',
    id,
    '--input',
    readFileSync(smallExample(), 'utf8'),
  ]);
  await stack.client.workflow.getHandle(id).result();
  const { stdout } = await run(cli!.path, [
    'workflow',
    'list',
    '--address',
    TEST_TEMPORAL_ADDRESS,
    '--query',
    `WorkflowId = '${id}' AND HarnessEnv = 'sim' AND HarnessStep = 1`,
    '--output',
    'json',
  ]);
  const listed = JSON.parse(stdout) as Array<{ execution: { workflowId: string }; status: string }>;
  expect(listed.map((w) => w.execution.workflowId)).toEqual([id]);
});

test('`doctor --json` reports the Temporal CLI, the server address and the UI URL', async () => {
  const report = JSON.parse((await harnessS('doctor', '--json').catch((err) => err)).stdout);
  expect(report.temporalCli.path).toBeTruthy();
  expect(report.temporalAddress).toBe(TEST_TEMPORAL_ADDRESS);
  const [host, port] = TEST_TEMPORAL_ADDRESS.split(':');
  expect(report.uiUrl).toBe(`http://${host}:${Number(port) + 1000}`);
  expect(report.checks.find((c: { name: string }) => c.name === 'temporal server').ok).toBe(true);
  expect(report.checks.find((c: { name: string }) => c.name === 'postgresql').ok).toBe(true);
});

test('`profiles show` prints the sibling x kind matrix with thin cells marked; --json has every version and the router picks', async () => {
  const id = uniqueRunId('cli-profiles');
  await harnessS('run', 'start', '--config', smallExample(), '--id', id, '--wait');
  const view = JSON.parse((await harnessS('profiles', 'show', id, '--json')).stdout);
  expect(view).toMatchObject({ runId: id, version: 1, policyVersion: 'sim-policy-base', priorStrength: 2 });
  expect(view.matrix.kinds).toEqual(['aggregate', 'api_call', 'lookup', 'multi_step']);
  expect(view.matrix.harnesses).toEqual(['ar-format', 'ec-docs-injected', 'ec-schema', 'ps-recipe', 'tr-budget']);
  // One probe task per kind and 2 rollouts per harness: every cell has at most 2 attempts, below 2 x the prior: thin.
  const cells = view.matrix.harnesses.flatMap((h: string) => view.matrix.kinds.map((k: string) => view.matrix.cells[h][k]));
  expect(cells.every((c: { thin: boolean; attempts: number }) => c.thin && c.attempts <= 2)).toBe(true);
  const decisions = await stack.store.routingDecisions(id);
  const picked = Object.values(view.picks['1'] ?? {}).flatMap((byHarness) =>
    Object.values(byHarness as Record<string, { chosen: number }>),
  );
  expect(picked.reduce((n, p) => n + p.chosen, 0)).toBe(decisions.length * 2);

  const { stdout } = await harnessS('profiles', 'show', id);
  expect(stdout).toMatch(/behaviour profiles v1 of run .* \[SIMULATED\], measured with sim-policy-base/);
  expect(stdout).toMatch(/^ {2}ec-schema +.*\*/m);
});

test('`profiles show` of an unknown run says so and exits 2', async () => {
  const failure = await harnessS('profiles', 'show', 'no-such-run').then(
    () => null,
    (err) => err as { code: number; stderr: string },
  );
  expect(failure?.code).toBe(2);
  expect(failure?.stderr).toMatch(/no run no-such-run in the run store/);
});

test('a numeric option that is not a whole number of at least 1 is refused as a usage error (exit 2), naming the option', async () => {
  for (const [args, option] of [
    [
      [
        'eval',
        '--env',
        'dbbench',
        '--data',
        'data/dbbench/dev.jsonl',
        '--harness',
        'base',
        '--base-url',
        'http://127.0.0.1:9/v1',
        '--model',
        'm',
        '--concurrency',
        '0',
      ],
      '--concurrency',
    ],
    [
      [
        'eval',
        '--env',
        'dbbench',
        '--data',
        'data/dbbench/dev.jsonl',
        '--harness',
        'base',
        '--base-url',
        'http://127.0.0.1:9/v1',
        '--model',
        'm',
        '--limit',
        'abc',
      ],
      '--limit',
    ],
    [['run', 'list', '--limit', '2.5'], '--limit'],
    [['demo', '--steps', '-3'], '--steps'],
  ] as const) {
    const failure = await harnessS(...args).then(
      () => null,
      (err) => err as { code: number; stderr: string },
    );
    expect(failure?.code).toBe(2);
    expect(failure?.stderr).toContain(`${option} must be a whole number of at least 1`);
  }
});

test('a mistyped workflow input sent straight to Temporal fails the run at once, naming the field and the nearest known one', async () => {
  const cli = findTemporalCli()!;
  const start = async (input: unknown) => {
    const id = uniqueRunId('typo');
    await run(cli.path, [
      'workflow',
      'start',
      '--address',
      TEST_TEMPORAL_ADDRESS,
      '--type',
      'harnessSRun',
      '--task-queue',
      'harness-s-control',
      '--workflow-id',
      id,
      '--input',
      JSON.stringify(input),
    ]);
    const failure = await stack.client.workflow
      .getHandle(id)
      .result()
      .then(
        () => null,
        (err: Error) => err,
      );
    return (failure?.cause as Error | undefined)?.message ?? '';
  };
  expect(await start({ cfg: {} })).toBe('workflow input is invalid: cfg: unknown; known here: config, resume, recover, fork');
  const typos = await start({ config: { ...stack.config({ steps: 1 }), stepz: 40, rollout: { groupsize: 4 } } });
  expect(typos).toContain('stepz: unknown; did you mean steps?');
  expect(typos).toContain('rollout.groupsize: unknown; did you mean groupSize?');
});

test('`config check` refuses typos and files the config names that do not exist', async () => {
  const file = path.join(dir, 'typo.json');
  writeFileSync(file, JSON.stringify({ config: { stepz: 40, rollout: { groupsize: 4 } } }));
  const typo = await harnessS('config', 'check', file).then(
    () => null,
    (err) => err as { code: number; stderr: string },
  );
  expect(typo?.code).toBe(2);
  expect(typo?.stderr).toMatch(/stepz: unknown; did you mean steps\?/);
  writeFileSync(file, JSON.stringify({ config: { env: { kind: 'charset', tasks: 'no/such/tasks.json' } } }));
  const missing = await harnessS('config', 'check', file).then(
    () => null,
    (err) => err as { code: number; stderr: string },
  );
  expect(missing?.stderr).toMatch(/env\.tasks: file not found: no\/such\/tasks\.json/);
  expect((await harnessS('config', 'check', 'examples/sim-quickstart.json')).stdout).toMatch(/valid \(sim, 20 steps/);
});

test('`npx harness-s` works in the checkout, and the command installed with `npm install -g` works from any folder', async () => {
  expect((await run('npx', ['harness-s', 'config', 'check', 'examples/sim-quickstart.json'], { cwd: ROOT, env })).stdout).toMatch(/valid/);
  const prefix = mkdtempSync(path.join(os.tmpdir(), 'harness-s-global-'));
  await run('npm', ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', ROOT], { env });
  const elsewhere = mkdtempSync(path.join(os.tmpdir(), 'harness-s-cwd-'));
  const { stdout } = await run(
    path.join(prefix, 'bin', 'harness-s'),
    ['config', 'check', path.join(ROOT, 'examples', 'sim-quickstart.json')],
    { cwd: elsewhere, env },
  );
  expect(stdout).toMatch(/valid \(sim, 20 steps/);
}, 120_000);
