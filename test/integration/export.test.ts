/**
 * `harness-s export`: a 2-step SIMULATED run's policy written as an adapter
 * folder (adapter_config.json, the sim policy's parameters, a manifest),
 * checked in the sim inference server against the trainer's log-probs and
 * unloaded after; and the refusals a user can meet (a step the run does not
 * have, a folder that is not empty, a check that cannot run).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseStoredRunConfig } from '../../core/config';
import { configHash, EXPORT_MANIFEST, exportPolicy, SIMULATED_LABEL } from '../../core/publish/export';
import { TinkerClient } from '../../core/trainer/tinker/client';
import { parseTinkerPath } from '../../core/trainer/tinker/wire';
import { SIM_ADAPTER_PARAMS_FILE } from '../../sim-cluster/checkpoints';
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const ROOT = path.resolve(__dirname, '..', '..');
const execFileAsync = promisify(execFile);
let stack: TestStack;
let runId = '';
let scratch: string;

beforeAll(async () => {
  stack = await startTestStack();
  scratch = mkdtempSync(path.join(os.tmpdir(), 'harness-s-export-test-'));
  runId = uniqueRunId('export');
  await stack.client.workflow.execute(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config: stack.config({ steps: 2 }) }],
  });
}, 180_000);
afterAll(async () => {
  await stack?.close();
});

const trainer = () => new TinkerClient({ baseUrl: stack.sim.url, apiKey: 'EMPTY', pollSeconds: 0.02 });
const simCheck = () => ({ server: `${stack.sim.url}/v1`, apiKey: 'EMPTY', tolerance: 1e-6 });

async function servedModels(): Promise<string[]> {
  const models = (await (await fetch(`${stack.sim.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
  return models.data.map((m) => m.id);
}

function harnessS(...args: string[]) {
  const env = { ...process.env, TEMPORAL_ADDRESS: TEST_TEMPORAL_ADDRESS, DATABASE_URL: TEST_DATABASE_URL, LOG_LEVEL: 'warn' };
  return execFileAsync(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['cli/main.ts', ...args], { cwd: ROOT, env });
}

test("exporting step 1 writes the trainer's saved parameters, adapter_config.json and a manifest labelled SIMULATED, and the check loads it with the trainer's log-probs then unloads it", async () => {
  const out = path.join(scratch, 'step-1');
  const { dir, manifest, check } = await exportPolicy(
    { store: stack.store, trainer: trainer() },
    { runId, step: 1, outDir: out, check: simCheck() },
  );
  const trained = (await stack.store.trainerStep(runId, 1))!;
  const stored = (await stack.store.getRun(runId))!;

  expect(dir).toBe(out);
  expect(readdirSync(dir).sort()).toEqual(['adapter_config.json', EXPORT_MANIFEST, SIM_ADAPTER_PARAMS_FILE].sort());
  expect(manifest).toEqual({
    runId,
    step: 1,
    policyVersion: trained.policyVersion,
    samplerPath: trained.samplerPath,
    baseModel: parseStoredRunConfig(stored.config, 'test').policy.model,
    configHash: configHash(stored.config),
    trainerModelId: trained.modelId,
    exportedAt: expect.any(String),
    simulated: true,
    label: SIMULATED_LABEL,
  });
  expect(JSON.parse(readFileSync(path.join(dir, EXPORT_MANIFEST), 'utf8'))).toEqual(manifest);
  expect(JSON.parse(readFileSync(path.join(dir, 'adapter_config.json'), 'utf8'))).toMatchObject({ simulated: true, peft_type: 'LORA' });

  // The parameters are the ones the sim trainer archived for that step.
  const tinkerPath = parseTinkerPath(trained.samplerPath)!;
  const saved = await stack.sim.store.readSamplerWeights(tinkerPath.modelId, tinkerPath.name);
  expect(saved).toBeDefined();
  expect(JSON.parse(readFileSync(path.join(dir, SIM_ADAPTER_PARAMS_FILE), 'utf8')).params).toEqual(saved!.params);

  expect(check).toMatchObject({ server: `${stack.sim.url}/v1`, unloaded: true, tolerance: 1e-6 });
  expect(check!.skipped).toBeUndefined();
  expect(check!.adapterName).toMatch(new RegExp(`^export-check-${runId}-1-`));
  expect(check!.probeMeanAbsDiff).toBeLessThan(1e-6);
  expect(await servedModels()).not.toContain(check!.adapterName);
});

test('without --step the export is of the last trained step', async () => {
  const { manifest, check } = await exportPolicy({ store: stack.store, trainer: trainer() }, { runId, outDir: path.join(scratch, 'last') });
  expect(manifest.step).toBe(1);
  expect(check).toBeNull();
});

test('a step the run does not have is refused, naming the steps it has, and nothing is written', async () => {
  const out = path.join(scratch, 'step-9');
  await expect(exportPolicy({ store: stack.store, trainer: trainer() }, { runId, step: 9, outDir: out })).rejects.toThrow(
    `run ${runId} has no trained step 9; its steps: 0, 1`,
  );
  expect(existsSync(out)).toBe(false);
});

test('a folder that is not empty is refused and left as it was; --force replaces it whole', async () => {
  const out = path.join(scratch, 'taken');
  await exportPolicy({ store: stack.store, trainer: trainer() }, { runId, step: 0, outDir: out });
  writeFileSync(path.join(out, 'notes.txt'), 'mine');
  await expect(exportPolicy({ store: stack.store, trainer: trainer() }, { runId, step: 1, outDir: out })).rejects.toThrow(
    /is not empty; choose another --out, or --force/,
  );
  expect(JSON.parse(readFileSync(path.join(out, EXPORT_MANIFEST), 'utf8')).step).toBe(0);

  const { manifest } = await exportPolicy({ store: stack.store, trainer: trainer() }, { runId, step: 1, outDir: out, force: true });
  expect(manifest.step).toBe(1);
  expect(readdirSync(out)).not.toContain('notes.txt');
  // Nothing of the export's own scaffolding is left beside it.
  expect(readdirSync(path.dirname(out)).filter((name) => name.startsWith('taken.'))).toEqual([]);
});

test('a check that cannot reach the inference server fails the export and writes nothing', async () => {
  const out = path.join(scratch, 'unchecked');
  await expect(
    exportPolicy(
      { store: stack.store, trainer: trainer() },
      { runId, step: 1, outDir: out, check: { ...simCheck(), server: 'http://127.0.0.1:9/v1' } },
    ),
  ).rejects.toThrow(/the export check failed: .*cannot reach the inference server.*nothing was written to/);
  expect(existsSync(out)).toBe(false);
  expect(readdirSync(scratch).filter((name) => name.startsWith('unchecked'))).toEqual([]);
});

test("the CLI checks against the run's own inference server, prints the folder and the mean |Δ| log-prob, and --json gives the manifest and the check", async () => {
  const out = path.join(scratch, 'cli');
  const text = await harnessS('export', runId, '--out', out);
  expect(text.stdout.split('\n')[0]).toBe(out);
  expect(text.stdout).toMatch(/^step 1 of /m);
  expect(text.stdout).toContain(SIMULATED_LABEL);
  expect(text.stdout).toMatch(/check: passed on .*: mean \|Δ\| log-prob \d\.\d\de[-+]\d+ from the trainer's probe .*unloaded after/);
  expect(text.stderr).toMatch(/unpacking the sampler weights of step 1/);

  const json = JSON.parse((await harnessS('export', runId, '--step', '0', '--out', path.join(scratch, 'cli-json'), '--json')).stdout);
  expect(json).toMatchObject({
    dir: path.join(scratch, 'cli-json'),
    manifest: { runId, step: 0, simulated: true },
    check: { unloaded: true },
  });
  expect(json.check.probeMeanAbsDiff).toBeLessThan(1e-6);

  const refused = await harnessS('export', runId, '--out', out).then(
    () => null,
    (err) => err as { code: number; stderr: string },
  );
  expect(refused?.code).toBe(2);
  expect(refused?.stderr).toMatch(/is not empty/);
}, 120_000);
