/**
 * A step's sampler weights as a directory vLLM can load. The trainer names
 * them by a `tinker://` path; vLLM's /v1/load_lora_adapter needs a local
 * directory with adapter_config.json. The archive (a .tar.gz) comes from the
 * trainer's checkpoints folder when the worker can read it (SkyRL:
 * `<checkpoints>/<model>/sampler_weights/<name>.tar.gz`), else from the
 * Tinker API's archive download (hosted Tinker, a remote SkyRL, the sim),
 * and is unpacked under the adapter directory, which every inference server
 * must see at the same path (the same machine, or a shared filesystem).
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { x as extract } from 'tar';
import type { TinkerClient } from './tinker/client';
import { parseTinkerPath } from './tinker/wire';

export class SamplerWeightsError extends Error {
  override name = 'SamplerWeightsError';
  constructor(
    message: string,
    /** false: the path or the archive is wrong and retrying will not help; true: an I/O failure a retry may get past. */
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** The worker's adapter directory: $HARNESS_S_ADAPTER_DIR, else .data/adapters under the working directory. */
export function adapterDirFromEnv(): string {
  return path.resolve(process.env.HARNESS_S_ADAPTER_DIR || path.join('.data', 'adapters'));
}

/** Model ids and checkpoint names as servers make them (hosted Tinker: '<uuid>:train:0'); no '/', no leading dot. */
const SAFE = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;
const MARKER = '.harness-s-complete';

export interface ResolveSamplerWeights {
  samplerPath: string;
  /** Downloads the archive when the checkpoints folder does not have it. */
  trainer: TinkerClient;
  /** The trainer's checkpoints folder as this worker sees it (optional). */
  checkpointsDir?: string;
  adapterDir: string;
}

/** The local directory holding the adapter of `samplerPath`; unpacked once, reused after. */
export async function resolveSamplerWeights(args: ResolveSamplerWeights): Promise<string> {
  const parsed = parseTinkerPath(args.samplerPath);
  if (!parsed || !SAFE.test(parsed.modelId) || !SAFE.test(parsed.name)) {
    throw new SamplerWeightsError(
      `'${args.samplerPath}' is not a tinker:// sampler weights path (tinker://<model>/<name> or tinker://<model>/sampler_weights/<name>)`,
      false,
    );
  }
  const target = path.join(path.resolve(args.adapterDir), parsed.modelId, parsed.name);
  if (await exists(path.join(target, MARKER))) return target;

  const local = args.checkpointsDir
    ? path.join(path.resolve(args.checkpointsDir), parsed.modelId, 'sampler_weights', `${parsed.name}.tar.gz`)
    : null;
  const source: Readable =
    local && (await exists(local))
      ? createReadStream(local)
      : Readable.from(await args.trainer.downloadCheckpointArchive(args.samplerPath));

  await fs.mkdir(path.dirname(target), { recursive: true });
  const staging = `${target}.${randomBytes(4).toString('hex')}.partial`;
  await fs.mkdir(staging);
  try {
    // Members stay inside the staging folder: tar strips absolute paths (SkyRL's archives have a '/' entry) and refuses '..'.
    await pipeline(source, extract({ cwd: staging }));
    const adapterRoot = await findAdapterRoot(staging);
    if (!adapterRoot)
      throw new SamplerWeightsError(`the archive of ${args.samplerPath} has no adapter_config.json; it is not a LoRA adapter`, false);
    await fs.writeFile(path.join(adapterRoot, MARKER), `${args.samplerPath}\n`);
    await moveIntoPlace(adapterRoot, target);
  } catch (err) {
    if (err instanceof SamplerWeightsError) throw err;
    throw new SamplerWeightsError(
      `cannot unpack the sampler weights of ${args.samplerPath}${local ? ` (${local})` : ''}: ${(err as Error).message}`,
      true,
    );
  } finally {
    await fs.rm(staging, { recursive: true, force: true });
  }
  return target;
}

/**
 * Renames the unpacked adapter to its place. Another worker may have put the
 * same weights there first (its copy is complete: it has the marker) and is
 * kept; an incomplete leftover of a crashed worker is replaced.
 */
async function moveIntoPlace(from: string, target: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await fs.rename(from, target);
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || attempt > 0) throw err;
      if (await exists(path.join(target, MARKER))) return;
      await fs.rm(target, { recursive: true, force: true });
    }
  }
}

async function exists(file: string): Promise<boolean> {
  return fs.stat(file).then(
    () => true,
    () => false,
  );
}

/** The folder holding adapter_config.json: the archive's root or its one top-level folder. */
async function findAdapterRoot(dir: string): Promise<string | null> {
  if (await exists(path.join(dir, 'adapter_config.json'))) return dir;
  const entries = await fs.readdir(dir, { withFileTypes: true });
  const folders = entries.filter((e) => e.isDirectory());
  if (folders.length === 1 && (await exists(path.join(dir, folders[0].name, 'adapter_config.json'))))
    return path.join(dir, folders[0].name);
  return null;
}
