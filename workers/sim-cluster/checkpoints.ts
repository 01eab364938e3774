/**
 * On-disk state of the SIMULATED cluster, so a restarted cluster continues
 * exactly where it stopped. Every file is written atomically (temp file,
 * fsync, rename): a crash leaves either the old or the new version.
 *
 * Layout under the data directory:
 *   trainer/models/<model_id>.json                 training state + its idempotency keys
 *   trainer/futures/<request_id>.json              finished future results (the newest FUTURE_RETENTION)
 *   trainer/sampler_weights/<model_id>/<name>.json weights saved for sampling (never overwritten)
 *   inference/adapters.json                        LoRA adapters loaded in the inference server
 *
 * A training op first writes its future's result, then commits by rewriting
 * its model file, which lists the ops applied to it with their idempotency
 * keys: state and "this op and key were applied" change in one rename, so a
 * retried op is applied exactly once. A successful future whose op is not in
 * its model's applied list never committed (a crash came in between) and is
 * treated as unknown.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { PolicyParams } from '../../core/envs/sim/policy-model';
import { formatZodError } from '../../core/validation';

/** Finished futures kept on disk; older ones are deleted (their retries get 404). */
export const FUTURE_RETENTION = 1000;
/** Committed ops (and so idempotency keys) remembered per training model; a retry comes soon after its first try. */
export const APPLIED_RETENTION = 1000;

/** Model ids and weight names become file names: no separators, no leading dot. */
export const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** One op committed to a training model; `key` is its Idempotency-Key header, if it had one. */
export const AppliedOp = z.object({ requestId: z.string(), route: z.string(), key: z.string().nullable() });
export type AppliedOp = z.infer<typeof AppliedOp>;

export const TrainingModelRecord = z.object({
  version: z.literal(1),
  modelId: z.string(),
  baseModel: z.string(),
  loraRank: z.number().int(),
  createdAt: z.string(),
  params: PolicyParams,
  /** Accumulated gradient of the loss since the last optim_step. */
  grad: PolicyParams,
  /** Adam first and second moments; the bias-correction step count is optimSteps. */
  adam: z.object({ m: PolicyParams, v: PolicyParams }),
  optimSteps: z.number().int().min(0),
  /** The ops committed to this model, oldest first (the newest APPLIED_RETENTION). */
  applied: z.array(AppliedOp),
});
export type TrainingModelRecord = z.infer<typeof TrainingModelRecord>;

export const SamplerWeightsRecord = z.object({
  version: z.literal(1),
  modelId: z.string(),
  name: z.string(),
  baseModel: z.string(),
  optimSteps: z.number().int(),
  savedAt: z.string(),
  params: PolicyParams,
});
export type SamplerWeightsRecord = z.infer<typeof SamplerWeightsRecord>;

export const FutureRecord = z.object({
  requestId: z.string(),
  modelId: z.string(),
  route: z.string(),
  finishedAt: z.string(),
  /** Exactly what retrieve_future answers: the op's result or `{error, category}`. */
  result: z.unknown(),
});
export type FutureRecord = z.infer<typeof FutureRecord>;

/** lora_name -> lora_path */
const AdapterRegistry = z.record(z.string(), z.string());

const SAMPLER_PATH = /^tinker:\/\/([^/]+)\/sampler_weights\/([^/]+)$/;

/** The `tinker://` path the trainer hands out for saved sampler weights. */
export function samplerWeightsUri(modelId: string, name: string): string {
  return `tinker://${modelId}/sampler_weights/${name}`;
}

/** The model id and name of a sampler-weights path, or undefined when it is not one. */
export function parseSamplerWeightsUri(uri: string): { modelId: string; name: string } | undefined {
  const match = SAMPLER_PATH.exec(uri);
  if (!match || !SAFE_NAME.test(match[1]) || !SAFE_NAME.test(match[2])) return undefined;
  return { modelId: match[1], name: match[2] };
}

/** Writes JSON so that readers see the old file or the whole new one, never a torn write. */
export async function writeJsonAtomic(file: string, value: unknown): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const handle = await fs.open(temp, 'w');
  try {
    await handle.writeFile(JSON.stringify(value));
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.rename(temp, file);
}

export class SimClusterStore {
  /** Finished future ids on disk, oldest first. */
  private futureIds: string[] = [];

  private constructor(readonly dataDir: string) {}

  static async open(dataDir: string): Promise<SimClusterStore> {
    const store = new SimClusterStore(path.resolve(dataDir));
    await fs.mkdir(store.dir('trainer', 'models'), { recursive: true });
    await fs.mkdir(store.dir('trainer', 'futures'), { recursive: true });
    await fs.mkdir(store.dir('trainer', 'sampler_weights'), { recursive: true });
    await fs.mkdir(store.dir('inference'), { recursive: true });
    store.futureIds = await store.listFuturesOldestFirst();
    return store;
  }

  async listTrainingModels(): Promise<TrainingModelRecord[]> {
    const dir = this.dir('trainer', 'models');
    const files = (await fs.readdir(dir)).filter((f) => f.endsWith('.json')).sort();
    return Promise.all(files.map((f) => readJson(path.join(dir, f), TrainingModelRecord)));
  }

  async writeTrainingModel(record: TrainingModelRecord): Promise<void> {
    await writeJsonAtomic(this.file(['trainer', 'models'], record.modelId), record);
  }

  async readSamplerWeights(modelId: string, name: string): Promise<SamplerWeightsRecord | undefined> {
    if (!SAFE_NAME.test(modelId) || !SAFE_NAME.test(name)) return undefined;
    return readJsonIfExists(this.file(['trainer', 'sampler_weights', modelId], name), SamplerWeightsRecord);
  }

  /** Saves sampler weights unless that name was saved before; returns the record now on disk (the first one). */
  async writeSamplerWeightsOnce(record: SamplerWeightsRecord): Promise<SamplerWeightsRecord> {
    const existing = await this.readSamplerWeights(record.modelId, record.name);
    if (existing) return existing;
    await writeJsonAtomic(this.file(['trainer', 'sampler_weights', record.modelId], record.name), record);
    return record;
  }

  async readFuture(requestId: string): Promise<FutureRecord | undefined> {
    if (!SAFE_NAME.test(requestId)) return undefined;
    return readJsonIfExists(this.file(['trainer', 'futures'], requestId), FutureRecord);
  }

  /** Persists a finished future and deletes the oldest beyond FUTURE_RETENTION. */
  async writeFuture(record: FutureRecord): Promise<void> {
    await writeJsonAtomic(this.file(['trainer', 'futures'], record.requestId), record);
    if (!this.futureIds.includes(record.requestId)) this.futureIds.push(record.requestId);
    const expired = this.futureIds.splice(0, Math.max(0, this.futureIds.length - FUTURE_RETENTION));
    await Promise.all(expired.map((id) => fs.rm(this.file(['trainer', 'futures'], id), { force: true })));
  }

  async readAdapters(): Promise<Record<string, string>> {
    return (await readJsonIfExists(this.adaptersFile(), AdapterRegistry)) ?? {};
  }

  async writeAdapters(adapters: Record<string, string>): Promise<void> {
    await writeJsonAtomic(this.adaptersFile(), adapters);
  }

  private adaptersFile(): string {
    return path.join(this.dir('inference'), 'adapters.json');
  }

  private dir(...parts: string[]): string {
    return path.join(this.dataDir, ...parts);
  }

  private file(dirParts: string[], name: string): string {
    if (!SAFE_NAME.test(name)) throw new Error(`'${name}' cannot be used as a file name`);
    return path.join(this.dir(...dirParts), `${name}.json`);
  }

  private async listFuturesOldestFirst(): Promise<string[]> {
    const dir = this.dir('trainer', 'futures');
    const files = (await fs.readdir(dir)).filter((f) => f.endsWith('.json'));
    const stamped = await Promise.all(files.map(async (f) => ({ f, mtime: (await fs.stat(path.join(dir, f))).mtimeMs })));
    return stamped.sort((a, b) => a.mtime - b.mtime).map(({ f }) => f.slice(0, -'.json'.length));
  }
}

async function readJson<T>(file: string, schema: z.ZodType<T>): Promise<T> {
  let raw: unknown;
  try {
    raw = JSON.parse(await fs.readFile(file, 'utf8'));
  } catch (err) {
    throw new Error(`sim cluster state file ${file} cannot be read as JSON: ${(err as Error).message}`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new Error(`sim cluster state file ${file} is invalid:\n${formatZodError(parsed.error)}`);
  return parsed.data;
}

async function readJsonIfExists<T>(file: string, schema: z.ZodType<T>): Promise<T | undefined> {
  try {
    await fs.access(file);
  } catch {
    return undefined;
  }
  return readJson(file, schema);
}
