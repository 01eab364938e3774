/**
 * Sampler weights named by a tinker:// path become a local adapter directory:
 * also for hosted Tinker's model ids ('<uuid>:train:0'), and when several
 * workers unpack the same step at once.
 */
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { c as tarCreate } from 'tar';
import { resolveSamplerWeights, SamplerWeightsError } from '../../core/trainer/sampler-weights';
import { TinkerClient } from '../../core/trainer/tinker/client';

const unreachable = new TinkerClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'x', pollSeconds: 1, connectionRetrySeconds: 0.01 });

async function checkpointsWith(modelId: string, name: string): Promise<string> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'ckpt-'));
  const adapter = mkdtempSync(path.join(os.tmpdir(), 'adapter-'));
  writeFileSync(path.join(adapter, 'adapter_config.json'), JSON.stringify({ r: 8, peft_type: 'LORA' }));
  writeFileSync(path.join(adapter, 'adapter_model.safetensors'), 'weights');
  const dir = path.join(root, modelId, 'sampler_weights');
  mkdirSync(dir, { recursive: true });
  await tarCreate({ gzip: true, file: path.join(dir, `${name}.tar.gz`), cwd: adapter }, [
    'adapter_config.json',
    'adapter_model.safetensors',
  ]);
  return root;
}

test("hosted Tinker's model ids ('<uuid>:train:0') are valid sampler paths", async () => {
  const modelId = '0f8e2c1a-5b6d-4e3f-9a7b-1c2d3e4f5a6b:train:0';
  const checkpointsDir = await checkpointsWith(modelId, 'step-1');
  const adapterDir = mkdtempSync(path.join(os.tmpdir(), 'adapters-'));
  const dir = await resolveSamplerWeights({
    samplerPath: `tinker://${modelId}/sampler_weights/step-1`,
    trainer: unreachable,
    checkpointsDir,
    adapterDir,
  });
  expect(dir).toBe(path.join(adapterDir, modelId, 'step-1'));
  expect(readFileSync(path.join(dir, 'adapter_model.safetensors'), 'utf8')).toBe('weights');
});

test('workers unpacking the same step at once all get the complete directory', async () => {
  const checkpointsDir = await checkpointsWith('model_1', 'step-2');
  const adapterDir = mkdtempSync(path.join(os.tmpdir(), 'adapters-'));
  const dirs = await Promise.all(
    Array.from({ length: 4 }, () =>
      resolveSamplerWeights({ samplerPath: 'tinker://model_1/step-2', trainer: unreachable, checkpointsDir, adapterDir }),
    ),
  );
  expect(new Set(dirs).size).toBe(1);
  expect(JSON.parse(readFileSync(path.join(dirs[0], 'adapter_config.json'), 'utf8'))).toMatchObject({ r: 8 });
});

test('a path that is no sampler path is refused, for good', async () => {
  const refused = await resolveSamplerWeights({
    samplerPath: 'tinker://../etc/passwd',
    trainer: unreachable,
    adapterDir: os.tmpdir(),
  }).catch((err: unknown) => err);
  expect(refused).toBeInstanceOf(SamplerWeightsError);
  expect(refused).toMatchObject({ retryable: false });
});
