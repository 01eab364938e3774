/**
 * On-disk state of the SIMULATED cluster, so a restarted cluster continues
 * exactly where it stopped. Every file is written atomically (temp file,
 * fsync, rename): a crash leaves either the old or the new version.
 *
 * Layout under the data directory (the checkpoints folder is SkyRL's):
 *   trainer/models/<model_id>.json                       training state + the ops applied to it (by seq_id)
 *   trainer/sessions.json                                client sessions and when they last sent a heartbeat
 *   trainer/futures/<request_id>.json                    finished future results (the newest FUTURE_RETENTION)
 *   trainer/sampler_weights/<model_id>/<name>.json       weights saved for sampling (never overwritten)
 *   trainer/checkpoints/<model_id>/sampler_weights/<name>.tar.gz  the same, as the archive clients download
 *   trainer/checkpoints/<model_id>/weights/<name>.json   training state (save_weights): params and Adam moments
 *   inference/adapters.json                              LoRA adapters loaded in the inference server
 *
 * Training checkpoints live apart from the live models, as a trainer's
 * checkpoints do (SkyRL: its checkpoints folder and database): deleting
 * trainer/models/ loses the models, as a restarted trainer does, and keeps
 * what a run restores from.
 *
 * A training op first writes its future's result, then commits by rewriting
 * its model file, which lists the ops applied to it with their seq_id and a
 * hash of their body: state and "this op was applied" change in one rename,
 * so an op sent again under its seq_id is applied exactly once. A successful
 * future whose op is not in its model's applied list never committed (a
 * crash came in between) and is treated as unknown.
 */
import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { create as createTar } from 'tar';
import { z } from 'zod';
import { PolicyParams } from '../core/envs/sim/policy-model';
import { formatZodError } from '../core/zod-errors';

/** Finished futures kept on disk; older ones are deleted (their retries get 404 and are sent again). */
export const FUTURE_RETENTION = 1000;
/** Committed ops (and so seq_ids) remembered per training model; a retry comes soon after its first try. */
export const APPLIED_RETENTION = 1000;

/** Model ids and weight names become file names: no separators, no leading dot. */
export const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** One op committed to a training model, keyed by its seq_id (null for ops without one). */
export const AppliedOp = z.object({ requestId: z.string(), route: z.string(), seqId: z.number().int().nullable(), bodyHash: z.string() });
export type AppliedOp = z.infer<typeof AppliedOp>;

export const SimLoraConfig = z.object({
  rank: z.number().int(),
  seed: z.number().int().nullish(),
  train_attn: z.boolean(),
  train_mlp: z.boolean(),
  train_unembed: z.boolean(),
});

export const TrainingModelRecord = z.object({
  version: z.literal(2),
  modelId: z.string(),
  sessionId: z.string(),
  baseModel: z.string(),
  lora: SimLoraConfig,
  /** 'unloaded' once its session expired or a client unloaded it: ops on it fail. */
  status: z.enum(['loaded', 'unloaded']),
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

export const SessionRecord = z.object({ createdAt: z.string(), lastHeartbeatAt: z.string(), status: z.enum(['active', 'expired']) });
export type SessionRecord = z.infer<typeof SessionRecord>;
const SessionsFile = z.record(z.string(), SessionRecord);

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

/** A model's full training state under a name (save_weights), loadable into another model (load_weights). */
export const TrainingStateRecord = z.object({
  version: z.literal(1),
  modelId: z.string(),
  name: z.string(),
  baseModel: z.string(),
  lora: SimLoraConfig,
  optimSteps: z.number().int().min(0),
  savedAt: z.string(),
  params: PolicyParams,
  adam: z.object({ m: PolicyParams, v: PolicyParams }),
});
export type TrainingStateRecord = z.infer<typeof TrainingStateRecord>;

export const FutureRecord = z.object({
  requestId: z.string(),
  modelId: z.string(),
  route: z.string(),
  finishedAt: z.string(),
  /** What the op produced: `{json}`, `{proto}` (base64 protobuf), or `{error, category}`. */
  result: z.union([
    z.object({ json: z.unknown() }),
    z.object({ proto: z.string() }),
    z.object({ error: z.string(), category: z.enum(['user', 'server']) }),
  ]),
});
export type FutureRecord = z.infer<typeof FutureRecord>;

/** The file a sim LoRA adapter directory carries its parameters in. */
export const SIM_ADAPTER_PARAMS_FILE = 'sim_policy_params.json';

/** lora_name -> adapter directory */
const AdapterRegistry = z.record(z.string(), z.string());

export function hashBody(value: unknown): string {
  return createHash('sha256')
    .update(typeof value === 'string' || value instanceof Uint8Array ? value : JSON.stringify(value))
    .digest('hex');
}

/** The `tinker://` path the sim trainer hands out for saved sampler weights (SkyRL's two-part form). */
export function samplerWeightsUri(modelId: string, name: string): string {
  return `tinker://${modelId}/${name}`;
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
    await fs.mkdir(store.dir('trainer', 'checkpoints'), { recursive: true });
    await fs.mkdir(store.dir('inference'), { recursive: true });
    store.futureIds = await store.listFuturesOldestFirst();
    return store;
  }

  /** Training models on disk; files of an older format are skipped (`skipped` names them). */
  async listTrainingModels(): Promise<{ models: TrainingModelRecord[]; skipped: string[] }> {
    const dir = this.dir('trainer', 'models');
    const files = (await fs.readdir(dir)).filter((f) => f.endsWith('.json')).sort();
    const models: TrainingModelRecord[] = [];
    const skipped: string[] = [];
    for (const f of files) {
      const raw = JSON.parse(await fs.readFile(path.join(dir, f), 'utf8')) as { version?: unknown };
      if (raw.version !== 2) skipped.push(f);
      else models.push(await readJson(path.join(dir, f), TrainingModelRecord));
    }
    return { models, skipped };
  }

  async readSessions(): Promise<Record<string, SessionRecord>> {
    return (await readJsonIfExists(path.join(this.dir('trainer'), 'sessions.json'), SessionsFile)) ?? {};
  }

  async writeSessions(sessions: Record<string, SessionRecord>): Promise<void> {
    await writeJsonAtomic(path.join(this.dir('trainer'), 'sessions.json'), sessions);
  }

  async writeTrainingModel(record: TrainingModelRecord): Promise<void> {
    await writeJsonAtomic(this.file(['trainer', 'models'], record.modelId), record);
  }

  async readSamplerWeights(modelId: string, name: string): Promise<SamplerWeightsRecord | undefined> {
    if (!SAFE_NAME.test(modelId) || !SAFE_NAME.test(name)) return undefined;
    return readJsonIfExists(this.file(['trainer', 'sampler_weights', modelId], name), SamplerWeightsRecord);
  }

  /**
   * Saves sampler weights unless that name was saved before, as a record and
   * as the archive clients download (a LoRA adapter directory, tar.gz):
   * adapter_config.json (PEFT's fields, marked simulated) and the parameters.
   */
  async writeSamplerWeightsOnce(record: SamplerWeightsRecord, lora: z.infer<typeof SimLoraConfig>): Promise<SamplerWeightsRecord> {
    const existing = await this.readSamplerWeights(record.modelId, record.name);
    if (existing && (await this.samplerArchive(record.modelId, record.name))) return existing;
    const staging = await fs.mkdtemp(path.join(this.dir('trainer', 'checkpoints'), '.staging-'));
    try {
      await fs.writeFile(
        path.join(staging, 'adapter_config.json'),
        JSON.stringify({
          simulated: true,
          peft_type: 'LORA',
          base_model_name_or_path: record.baseModel,
          r: lora.rank,
          lora_alpha: 32,
          target_modules: null,
        }),
      );
      await fs.writeFile(path.join(staging, SIM_ADAPTER_PARAMS_FILE), JSON.stringify(record));
      const archive = this.samplerArchivePath(record.modelId, record.name);
      await fs.mkdir(path.dirname(archive), { recursive: true });
      const temp = `${archive}.${randomBytes(4).toString('hex')}.tmp`;
      await createTar({ gzip: true, file: temp, cwd: staging, portable: true }, ['adapter_config.json', SIM_ADAPTER_PARAMS_FILE]);
      await fs.rename(temp, archive);
    } finally {
      await fs.rm(staging, { recursive: true, force: true });
    }
    await writeJsonAtomic(this.file(['trainer', 'sampler_weights', record.modelId], record.name), record);
    return record;
  }

  /** The archive of saved sampler weights, or undefined when there is none. */
  async samplerArchive(modelId: string, name: string): Promise<string | undefined> {
    if (!SAFE_NAME.test(modelId) || !SAFE_NAME.test(name)) return undefined;
    const file = this.samplerArchivePath(modelId, name);
    return (await fs.stat(file).catch(() => null)) ? file : undefined;
  }

  /** The sampler checkpoints of a model, by name. */
  async samplerCheckpoints(modelId: string): Promise<Array<{ name: string; savedAt: Date }>> {
    if (!SAFE_NAME.test(modelId)) return [];
    const dir = path.join(this.dir('trainer', 'checkpoints'), modelId, 'sampler_weights');
    const files = (await fs.readdir(dir).catch(() => [] as string[])).filter((f) => f.endsWith('.tar.gz'));
    return Promise.all(
      files.map(async (f) => ({ name: f.slice(0, -'.tar.gz'.length), savedAt: (await fs.stat(path.join(dir, f))).mtime })),
    );
  }

  private samplerArchivePath(modelId: string, name: string): string {
    return path.join(this.dir('trainer', 'checkpoints'), modelId, 'sampler_weights', `${name}.tar.gz`);
  }

  async readTrainingState(modelId: string, name: string): Promise<TrainingStateRecord | undefined> {
    if (!SAFE_NAME.test(modelId) || !SAFE_NAME.test(name)) return undefined;
    return readJsonIfExists(this.trainingStatePath(modelId, name), TrainingStateRecord);
  }

  async writeTrainingState(record: TrainingStateRecord): Promise<void> {
    if (!SAFE_NAME.test(record.modelId) || !SAFE_NAME.test(record.name))
      throw new Error(`'${record.modelId}/${record.name}' cannot be used as a file name`);
    await writeJsonAtomic(this.trainingStatePath(record.modelId, record.name), record);
  }

  /** Deletes a training state; false when there was none. */
  async deleteTrainingState(modelId: string, name: string): Promise<boolean> {
    if (!SAFE_NAME.test(modelId) || !SAFE_NAME.test(name)) return false;
    const file = this.trainingStatePath(modelId, name);
    if (!(await fs.stat(file).catch(() => null))) return false;
    await fs.rm(file, { force: true });
    return true;
  }

  /** The training states saved of a model, by name. */
  async trainingStates(modelId: string): Promise<Array<{ name: string; savedAt: Date }>> {
    if (!SAFE_NAME.test(modelId)) return [];
    const dir = path.join(this.dir('trainer', 'checkpoints'), modelId, 'weights');
    const files = (await fs.readdir(dir).catch(() => [] as string[])).filter((f) => f.endsWith('.json'));
    return Promise.all(files.map(async (f) => ({ name: f.slice(0, -'.json'.length), savedAt: (await fs.stat(path.join(dir, f))).mtime })));
  }

  private trainingStatePath(modelId: string, name: string): string {
    return path.join(this.dir('trainer', 'checkpoints'), modelId, 'weights', `${name}.json`);
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
