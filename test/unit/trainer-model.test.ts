import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SMOLLM2_135M, TINY_QWEN3 } from '../../infra/engines/catalog';
import { trainerModelDir } from '../../infra/engines/trainer-model';

function builtModel(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-model-'));
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ architectures: ['LlamaForCausalLM'], dtype: 'float32' }));
  writeFileSync(path.join(dir, 'model.safetensors'), 'weights');
  return dir;
}

test('SkyRL gets SmolLM2 in bfloat16: a folder of links to the built files, config.json with that dtype; vLLM keeps the float32 folder', () => {
  const model = builtModel();
  const skyrl = mkdtempSync(path.join(os.tmpdir(), 'harness-s-skyrl-'));
  const dir = trainerModelDir(SMOLLM2_135M, model, skyrl);
  expect(dir).not.toBe(model);
  expect(JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'))).toEqual({
    architectures: ['LlamaForCausalLM'],
    dtype: 'bfloat16',
  });
  expect(readlinkSync(path.join(dir, 'model.safetensors'))).toBe(path.join(model, 'model.safetensors'));
  expect(JSON.parse(readFileSync(path.join(model, 'config.json'), 'utf8')).dtype).toBe('float32');
  // Made again on each start (a rebuilt model's files are the ones linked).
  mkdirSync(path.join(dir, 'stale'));
  expect(trainerModelDir(SMOLLM2_135M, model, skyrl)).toBe(dir);
  expect(existsSync(path.join(dir, 'stale'))).toBe(false);
});

test('a model trained in the dtype it was built in is loaded from its own folder', () => {
  const model = builtModel();
  expect(trainerModelDir(TINY_QWEN3, model, mkdtempSync(path.join(os.tmpdir(), 'harness-s-skyrl-')))).toBe(model);
});
