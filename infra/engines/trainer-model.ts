/**
 * The folder SkyRL's Tinker server loads as its base model. SkyRL's JAX
 * backend computes in the dtype named by the folder's config.json; a model
 * whose `trainerDtype` differs from the dtype it was built in gets a folder of
 * its own in the trainer's state directory: the model's files linked, and
 * config.json with that dtype (the weights are cast when loaded). vLLM serves
 * the built folder as it is.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { EngineModel } from './catalog';

export function trainerModelDir(model: EngineModel, modelDir: string, skyrlDir: string): string {
  if (model.trainerDtype === model.dtype) return modelDir;
  const dir = path.join(skyrlDir, `base-model-${model.trainerDtype}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const name of readdirSync(modelDir)) {
    if (name !== 'config.json') symlinkSync(path.join(modelDir, name), path.join(dir, name));
  }
  const configFile = path.join(modelDir, 'config.json');
  if (!existsSync(configFile)) throw new Error(`${modelDir} has no config.json: build the model again (harness-s engines setup)`);
  const config = JSON.parse(readFileSync(configFile, 'utf8')) as Record<string, unknown>;
  // transformers 5 writes `dtype`; older folders carry `torch_dtype`.
  const key = 'torch_dtype' in config && !('dtype' in config) ? 'torch_dtype' : 'dtype';
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, [key]: model.trainerDtype }, null, 2));
  return dir;
}
