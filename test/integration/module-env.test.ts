/**
 * A user's env from a module of its own (env.kind "module"): the example in
 * examples/module-env/ trains through Temporal on real workers, which load
 * the module themselves, with dead groups rescued by its siblings; modules
 * that are not env modules get errors that name what is missing.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import os from 'node:os';
import path from 'node:path';
import { parseRunConfig } from '../../core/config';
import { createEnvironment } from '../../core/envs/registry';
import { harnessSRun } from '../../workflows/run';
import { TASK_QUEUES } from '../../workflows/definitions';
import { TEST_DATABASE_URL } from './env';
import { startRecordingTrainer, type RecordingTrainer } from './recording-trainer';
import { startScriptedPolicyServer, type ScriptedPolicyServer } from './scripted-policy-server';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const EXAMPLE = path.resolve(__dirname, '../../examples/module-env.json');
const exampleConfig = () => JSON.parse(readFileSync(EXAMPLE, 'utf8')).config;

describe('a module env that is not one', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'module-env-'));
  const envOf = (module: string, options = {}) => createEnvironment(parseRunConfig({ env: { kind: 'module', module, options } }).env);

  test('a module that is not there: the path it looked for', () => {
    expect(() => envOf('./no/such/env.ts')).toThrow(/env.module '\.\/no\/such\/env\.ts': cannot find it \(looked for .*no\/such\/env\.ts/);
  });

  test('a module without what an env module exports: each missing piece named', () => {
    const file = path.join(dir, 'half.js');
    writeFileSync(file, "module.exports = { name: 'Half Env', harnessDir: 'nowhere' };\n");
    let message = '';
    try {
      envOf(file);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain(`env.module '${file}' (${file}) is not an env module`);
    expect(message).toContain('`name`: a string of lower-case letters');
    expect(message).toContain('`create`: a function');
    expect(message).toContain(`\`harnessDir\`: ${path.join(dir, 'nowhere')} is not a folder`);
  });

  test('a module whose create() does not return an Environment, and options its schema refuses', () => {
    mkdirSync(path.join(dir, 'pool'), { recursive: true });
    writeFileSync(
      path.join(dir, 'pool', 'base.yaml'),
      'id: base\nparent: null\ndirection: base\nenv: thin\ndescription: The task as asked.\n',
    );
    const file = path.join(dir, 'thin.js');
    writeFileSync(file, "module.exports = { name: 'thin', harnessDir: 'pool', create: () => ({ id: 'thin' }) };\n");
    expect(() => envOf(file)).toThrow(/create\(\) returned no Environment: it lacks listTasks, describeTask, harnesses, startEpisode/);
    expect(() => envOf('./examples/module-env/env.ts', { successShare: 2 })).toThrow(
      /env.options for env module '\.\/examples\/module-env\/env\.ts' \(shout\) are invalid/,
    );
  });

  test('the example loads with its pool and tasks', () => {
    const env = createEnvironment(parseRunConfig(exampleConfig()).env);
    expect(env.id).toBe('shout');
    expect(env.harnesses().map((h) => h.id)).toEqual(['base', 'ec-capitals', 'ps-example']);
    expect(env.listTasks()).toHaveLength(8);
  });
});

describe('the example module env trains through Temporal', () => {
  let server: ScriptedPolicyServer;
  let trainer: RecordingTrainer;
  let stack: TestStack;

  beforeAll(async () => {
    // The policy answers in capitals only when its prompt says it is scored on them (the contract sibling), not from the worked example.
    server = await startScriptedPolicyServer((messages) => {
      const phrase = /Say this phrase: (.*)$/m.exec(messages.map((m) => m.content).join('\n'))?.[1] ?? '';
      const told = messages.some((m) => m.role === 'system' && /capital letters/.test(m.content));
      return told ? phrase.toUpperCase() : phrase;
    });
    trainer = await startRecordingTrainer();
    stack = await startTestStack();
  });
  afterAll(async () => {
    await stack?.close();
    await trainer?.close();
    await server?.close();
  });

  test('every base group dies, siblings rescue it, and the trainer trains on the rescued trajectories', async () => {
    const example = exampleConfig();
    const config = parseRunConfig({
      ...example,
      steps: 2,
      policy: { baseUrl: `${server.url}/v1`, model: 'scripted-model' },
      trainer: { baseUrl: trainer.url, pollSeconds: 0.01 },
      rollout: { ...example.rollout, tasksPerStep: 3, groupSize: 2, concurrency: 2 },
      eval: { ...example.eval, enabled: false },
    });
    const runId = uniqueRunId('module-env');
    const summary = await stack.client.workflow.execute(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config }],
    });
    expect(summary.stepsCompleted).toBe(2);

    const run = await stack.store.getRun(runId);
    expect(run?.env).toBe('shout');
    const { rows } = await stack.store.queryForTests(
      `SELECT role, harness_id, success FROM trajectories WHERE run_id = $1 AND phase = 'train'`,
      [runId],
    );
    const base = rows.filter((r) => r.role === 'base');
    const rescued = rows.filter((r) => r.role === 'rescue');
    expect(base.length).toBe(2 * 3 * 2);
    expect(base.every((r) => !r.success)).toBe(true);
    // Every dead group is rescued by both siblings: the contract's rollouts succeed, the example's fail, so the group has an advantage to learn from.
    expect(new Set(rescued.map((r) => r.harness_id))).toEqual(new Set(['ec-capitals', 'ps-example']));
    expect(rescued.filter((r) => r.harness_id === 'ec-capitals').every((r) => r.success)).toBe(true);
    expect(rescued.filter((r) => r.harness_id === 'ps-example').every((r) => !r.success)).toBe(true);
    expect(trainer.optimSteps).toBe(2);
    expect(trainer.datums.length).toBeGreaterThan(0);
  });

  test('harness-s eval --config takes the module env from the run config', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx',
        'cli/main.ts',
        'eval',
        '--config',
        'examples/module-env.json',
        '--harness',
        'ec-capitals',
        '--base-url',
        `${server.url}/v1`,
        '--model',
        'scripted-model',
        '--max-turns',
        '1',
        '--json',
      ],
      { cwd: path.resolve(__dirname, '../..'), env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL } },
    );
    expect(JSON.parse(stdout)).toMatchObject({ harness: 'ec-capitals', total: 8, passed: 8 });
  });
});
