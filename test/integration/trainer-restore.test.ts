/**
 * A run outlives its trainer, on the SIMULATED cluster: the trainer loses the
 * run's model twice (restarted with its live models deleted while the run is
 * paused, as the runbook does; then the model unloaded mid-step, as an
 * expired session does), and each time the run restores from its latest
 * checkpoint on its own, re-runs the steps after it and completes, one
 * optimizer step per training step. A fork then starts from a checkpoint with
 * the parent's policy exactly, and a step's policy is exported as an adapter
 * folder that the inference server loads with the trainer's log-probs.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { checkExport, configHash, EXPORT_MANIFEST, exportPolicy } from '../../core/publish/export';
import { metricsRegistry } from '../../core/metrics';
import { TinkerClient } from '../../core/trainer/tinker/client';
import { SIM_ADAPTER_PARAMS_FILE } from '../../sim-cluster/checkpoints';
import { loadSimWorld } from '../../core/envs/sim/world';
import { runView, forkRun } from '../../cli/runs';
import { startSimCluster, type SimCluster } from '../../sim-cluster/server';
import { harnessSRun } from '../../workflows';
import { pauseSignal, resumeSignal, statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { silentLogger, startTestStack, uniqueRunId, type TestStack } from './stack';
import { waitFor } from './waiting';

let stack: TestStack;
let restarted: SimCluster | null = null;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(async () => {
  await stack?.close();
  await restarted?.close();
});

/** The runbook's loss: the trainer stops, its live models are deleted, it starts again (same port, same data). */
async function restartSimWithoutModels(): Promise<void> {
  const current = restarted ?? stack.sim;
  const { port } = current;
  const dataDir = current.store.dataDir;
  await current.close();
  if (current === stack.sim) (stack.sim as { close: () => Promise<void> }).close = async () => undefined;
  rmSync(path.join(dataDir, 'trainer', 'models'), { recursive: true, force: true });
  restarted = await startSimCluster({ world: loadSimWorld(), dataDir, port, logger: silentLogger });
}

async function trainerPost(route: string, body: unknown): Promise<unknown> {
  const response = await fetch(`${stack.sim.url}/api/v1/${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return response.json();
}

const STEPS = 8;
let parentRunId = '';

/** harness_s_trainer_restores_total of one kind, as this process's workers counted it. */
async function restoresCounted(kind: string): Promise<number> {
  const metric = await metricsRegistry.getSingleMetric('harness_s_trainer_restores_total')!.get();
  return metric.values.find((v) => v.labels.kind === kind)?.value ?? 0;
}

test('a run whose trainer loses its model twice restores from its latest checkpoint each time and completes, one optimizer step per step', async () => {
  const runId = uniqueRunId('restore');
  parentRunId = runId;
  const countedBefore = await restoresCounted('checkpoint');
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: stack.config({
          steps: STEPS,
          checkpoint: { every: 2, keep: 2 },
          router: { probeTasksPerKind: 1, probeRollouts: 2, reanchorEvery: 0 },
          eval: { enabled: false },
        }),
      },
    ],
  });

  // Loss 1, during a pause: stop the trainer, delete its live models, start it again.
  await waitFor('step 2', async () => (await stack.store.steps(runId)).length >= 3);
  await handle.signal(pauseSignal, { reason: 'ops: trainer maintenance' });
  await waitFor('the run to hold between steps', async () => {
    const status = await handle.query(statusQuery);
    return status.paused && status.stepProgress === null && (await stack.store.steps(runId)).length === status.step;
  });
  const firstModel = (await stack.store.getRun(runId))!.trainerModelId!;
  await restartSimWithoutModels();
  await handle.signal(resumeSignal);
  const first = await waitFor('the first restore', async () => (await stack.store.restores(runId)).find((r) => r.status === 'done'));
  expect(first).toMatchObject({ restore: 1, kind: 'checkpoint', lostModelId: firstModel });

  // Loss 2, mid-step: the trainer unloads the restored model (as when its session expires).
  const secondModel = first.modelId!;
  await waitFor('two more steps', async () => (await stack.store.steps(runId)).length >= first.fromStep! + 3);
  await trainerPost('unload_model', { model_id: secondModel, type: 'unload_model' });

  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(STEPS);
  const restores = (await stack.store.restores(runId)).filter((r) => r.kind !== 'fork');
  expect(restores.map((r) => [r.restore, r.kind, r.status, r.lostModelId])).toEqual([
    [1, 'checkpoint', 'done', firstModel],
    [2, 'checkpoint', 'done', secondModel],
  ]);
  const checkpointSteps = (await stack.store.checkpoints(runId, { includeDeleted: true })).map((c) => c.step);
  for (const r of restores) {
    expect(checkpointSteps).toContain(r.fromStep);
    expect(r.atStep).toBeGreaterThan(r.fromStep!);
  }
  // Every step once among the live records; what the superseded steps stored is kept, marked.
  expect((await stack.store.steps(runId)).map((s) => s.step)).toEqual([...Array(STEPS).keys()]);
  expect((await stack.store.supersededBy(runId, 2)).trajectories).toBeGreaterThan(0);

  // One optimizer step per training step, on the trainer's own records: the final model loaded the
  // checkpoint's optimizer state (its step count) and took one step per step it trained since.
  const finalModel = (await stack.store.getRun(runId))!.trainerModelId!;
  const trained = await Promise.all([...Array(STEPS).keys()].map(async (s) => (await stack.store.trainerStep(runId, s))!.datums > 0));
  const info = (await trainerPost('get_info', { model_id: finalModel })) as { optim_steps: number };
  expect(info.optim_steps).toBe(trained.filter(Boolean).length);
  // The ledger agrees: the final model's optim_steps are those of the steps after the second restore.
  const ops = (await stack.store.trainerOps(runId)).filter((o) => o.modelId === finalModel && o.op === 'optim_step' && !o.failed);
  expect(ops.map((o) => o.step)).toEqual([...Array(STEPS).keys()].filter((s) => s > restores[1].fromStep! && trained[s]));

  // Status shows it, as `run status --json` prints it; only the last checkpoint.keep are kept.
  const view = await runView(stack.client, runId, stack.store);
  expect(view.restores.map(({ fromStep, atStep }) => ({ fromStep, atStep }))).toEqual(
    restores.map(({ fromStep, atStep }) => ({ fromStep, atStep })),
  );
  expect(view.restores.every((r) => !Number.isNaN(Date.parse(r.at)))).toBe(true);
  expect(view.parent).toBeNull();
  expect((await stack.store.checkpoints(runId)).length).toBeLessThanOrEqual(2);
  expect((await restoresCounted('checkpoint')) - countedBefore).toBe(2);
});

test('a fork starts from the parent checkpoint at or before the step, serving exactly the parent policy of that step', async () => {
  expect(parentRunId).not.toBe('');
  const live = await stack.store.checkpoints(parentRunId);
  const atStep = live.at(-1)!.step + 1; // past the newest checkpoint: the fork takes that one
  await expect(
    forkRun(stack.client, stack.store, { parentRunId, fromStep: atStep, runId: parentRunId, change: { steps: atStep + 3 } }),
  ).rejects.toThrow(/already used by a run in the run store/);
  await expect(forkRun(stack.client, stack.store, { parentRunId, fromStep: 0 })).rejects.toThrow(
    /has no training checkpoint at or before step 0 \(its checkpoints are at steps/,
  );
  await expect(
    forkRun(stack.client, stack.store, { parentRunId, fromStep: atStep, change: { rollout: { groupSize: 2 } } }),
  ).rejects.toThrow(/fork change is invalid:.*\n.*cannot change during a run: groupSize/);
  const forked = await forkRun(stack.client, stack.store, { parentRunId, fromStep: atStep, change: { steps: atStep + 3 } });
  expect(forked.checkpointStep).toBe(live.at(-1)!.step);
  const summary = await stack.client.workflow.getHandle(forked.runId).result();
  expect(summary.stepsCompleted).toBe(3); // its own steps: atStep .. atStep + 2

  const loaded = await stack.store.findRestore(forked.runId, null);
  expect(loaded).toMatchObject({ kind: 'fork', status: 'done', fromRunId: parentRunId, fromStep: forked.checkpointStep });
  expect(await stack.store.getRun(forked.runId)).toMatchObject({ parent: { runId: parentRunId, step: forked.checkpointStep } });
  const view = await runView(stack.client, forked.runId, stack.store);
  expect(view.parent).toEqual({ runId: parentRunId, step: forked.checkpointStep });

  // The fork's first step rolled out with its loaded policy, whose log-probs equal the parent's policy of that step.
  const { rows } = await stack.store.queryForTests(
    "SELECT DISTINCT policy_version FROM trajectories WHERE run_id = $1 AND phase = 'train' AND step = $2",
    [forked.runId, forked.checkpointStep + 1],
  );
  expect(rows.map((r) => r.policy_version)).toEqual([loaded!.policyVersion]);
  const parentStep = (await stack.store.trainerStep(parentRunId, forked.checkpointStep))!;
  const logprobs = async (model: string) => {
    const response = await fetch(`${stack.sim.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, prompt: parentStep.probe!.tokens, max_tokens: 1, temperature: 0, prompt_logprobs: 0 }),
    });
    const body = (await response.json()) as { choices: Array<{ prompt_logprobs: Array<Record<string, { logprob: number }> | null> }> };
    return parentStep.probe!.tokens.map((id, i) => body.choices[0].prompt_logprobs[i]?.[String(id)]?.logprob ?? null);
  };
  const forkLogprobs = await logprobs(loaded!.policyVersion!);
  expect(forkLogprobs.filter((x) => x !== null).length).toBeGreaterThan(0);
  expect(forkLogprobs).toEqual(await logprobs(parentStep.policyVersion));
  // and the trainer's own log-probs of that step (the publish probe)
  for (const [k, position] of parentStep.probe!.positions.entries())
    expect(forkLogprobs[position]).toBeCloseTo(parentStep.probe!.logprobs[k], 6);
});

test('export writes a step policy as an adapter folder with a manifest, and it loads in the inference server with the trainer log-probs', async () => {
  expect(parentRunId).not.toBe('');
  const out = path.join(mkdtempSync(path.join(os.tmpdir(), 'harness-s-export-test-')), 'policy');
  const { dir, manifest } = await exportPolicy(
    { store: stack.store, trainer: new TinkerClient({ baseUrl: stack.sim.url, apiKey: 'EMPTY', pollSeconds: 0.02 }) },
    { runId: parentRunId, step: 5, outDir: out },
  );
  const trained = (await stack.store.trainerStep(parentRunId, 5))!;
  expect(readdirSync(dir).sort()).toEqual(['adapter_config.json', EXPORT_MANIFEST, SIM_ADAPTER_PARAMS_FILE].sort());
  expect(manifest).toMatchObject({
    runId: parentRunId,
    step: 5,
    policyVersion: trained.policyVersion,
    samplerPath: trained.samplerPath,
    simulated: true,
    configHash: configHash((await stack.store.getRun(parentRunId))!.config),
    label: expect.stringMatching(/^SIMULATED/),
  });
  expect(JSON.parse(readFileSync(path.join(dir, EXPORT_MANIFEST), 'utf8'))).toEqual(manifest);
  // The parameters are the ones the trainer saved for that step.
  const parsed = /^tinker:\/\/([^/]+)\/(.+)$/.exec(trained.samplerPath)!;
  const saved = await stack.sim.store.readSamplerWeights(parsed[1], parsed[2].replace(/^sampler_weights\//, ''));
  expect(JSON.parse(readFileSync(path.join(dir, SIM_ADAPTER_PARAMS_FILE), 'utf8')).params).toEqual(saved!.params);

  const check = await checkExport(
    { store: stack.store },
    { dir, manifest, server: `${stack.sim.url}/v1`, apiKey: 'EMPTY', tolerance: 1e-6 },
  );
  expect(check.probeMeanAbsDiff).not.toBeNull();
  expect(check.probeMeanAbsDiff!).toBeLessThan(1e-6); // the same parameters; float rounding apart
  const models = (await (await fetch(`${stack.sim.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
  expect(models.data.map((m) => m.id)).not.toContain(check.adapterName); // unloaded after the check

  await expect(
    exportPolicy(
      { store: stack.store, trainer: new TinkerClient({ baseUrl: stack.sim.url, apiKey: 'EMPTY', pollSeconds: 0.02 }) },
      { runId: parentRunId, step: 5, outDir: out },
    ),
  ).rejects.toThrow(/is not empty; choose another --out, or --force/);
  await expect(
    exportPolicy(
      { store: stack.store, trainer: new TinkerClient({ baseUrl: stack.sim.url, apiKey: 'EMPTY', pollSeconds: 0.02 }) },
      { runId: parentRunId, step: 99, outDir: `${out}-2` },
    ),
  ).rejects.toThrow(/has no trained step 99; its steps: 0\.\.7/);
});
