/**
 * The official tinker Python SDK (the version SkyRL 0.4 pins) drives the sim
 * cluster's trainer through create_model, forward_backward
 * (importance_sampling), optim_step, save_weights_for_sampler, sampling, and
 * the training state (save_state, then create_training_client_from_state_with_optimizer,
 * which calls weights_info, create_model and load_weights): the embedded
 * default speaks the real protocol, not one of its own.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { loadSimWorld } from '../../core/envs/sim/world';
import type { InstalledEngines } from '../../infra/engines/install';
import { enginesForTests, ENGINES_SETUP_TIMEOUT_MS } from './engines';
import { startSimCluster, type SimCluster } from '../../sim-cluster/server';

const world = loadSimWorld();
let cluster: SimCluster;
let installed: InstalledEngines;

beforeAll(async () => {
  installed = await enginesForTests();
  cluster = await startSimCluster({ world, dataDir: mkdtempSync(path.join(os.tmpdir(), 'sdk-sim-')), logger: pino({ level: 'silent' }) });
}, ENGINES_SETUP_TIMEOUT_MS);
afterAll(() => cluster?.close());

test('the official tinker SDK trains, saves and restores the training state, and samples the sim policy through the sim trainer', async () => {
  const chat = (await (
    await fetch(`${cluster.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: world.model.name,
        seed: 3,
        logprobs: true,
        return_token_ids: true,
        messages: [{ role: 'user', content: '[SIMULATED] Task lookup-1 kind lookup: find one value in a table' }],
      }),
    })
  ).json()) as { prompt_token_ids: number[]; choices: Array<{ token_ids: number[]; logprobs: { content: Array<{ logprob: number }> } }> };
  const spec = {
    prompt: chat.prompt_token_ids,
    completion: chat.choices[0].token_ids,
    logprobs: chat.choices[0].logprobs.content.map((c) => c.logprob),
  };

  const { stdout } = await promisify(execFile)(
    installed.venvs.skyrl.python,
    [path.join(__dirname, 'sdk', 'tinker_sdk_check.py'), cluster.url, world.model.name, JSON.stringify(spec)],
    { env: { ...process.env, TINKER_TELEMETRY: '0' }, timeout: 120_000 },
  );
  const result = JSON.parse(stdout.trim().split('\n').at(-1)!);
  expect(result.sdk_version).toMatch(/^0\.25\./);
  expect(result.supported_models).toEqual([world.model.name]);
  // On-policy: the trainer's log-probs of the completion are the sampler's.
  const logprobs: number[] = result.forward_backward.logprobs[0];
  expect(logprobs.slice(spec.prompt.length - 1)).toEqual(spec.logprobs.map((lp) => expect.closeTo(lp, 5)));
  expect(result.forward_backward.metrics['loss:sum']).toBeCloseTo(-1, 5);
  expect(result.optim_step).toMatchObject({ 'optim/step': 1, grad_norm: expect.any(Number) });
  expect(result.saved_path).toBe(`tinker://${result.model_id}/sdk-step-1`);
  // The training state round-trips through the SDK's own restore path (weights_info, create_model, load_weights).
  expect(result.state_path).toBe(`tinker://${result.model_id}/weights/sdk-state-1`);
  expect(result.restored_model_id).not.toBe(result.model_id);
  expect(result.forward_restored).toEqual(result.forward_original);
  expect(result.samples).toHaveLength(2);
  for (const sample of result.samples) {
    expect(sample.tokens).toHaveLength(3); // format, behaviour, <|end|>
    expect(sample.logprobs).toHaveLength(3);
  }
}, 180_000);
