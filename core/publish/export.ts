/**
 * A trained policy out of the service (`harness-s export`): the sampler
 * weights of a run's step as a LoRA adapter folder in the format vLLM and
 * PEFT load (adapter_config.json and the weights; on the sim, the SIMULATED
 * policy's parameters), with a manifest `harness-s-export.json` saying what
 * it is: run, step, policy version, base model, the hash of the run's config.
 *
 * The folder is assembled beside its destination and renamed into place, so a
 * failure leaves nothing half-written. The check loads it into an inference
 * server under a throwaway adapter name and compares its log-probs of the
 * step's publish probe with the trainer's, as publishing does, then unloads
 * it. Run as part of the export, the check runs before the rename: a folder
 * that fails it never appears at the destination.
 */
import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { parseStoredRunConfig } from '../config';
import { UserError } from '../errors';
import type { TinkerClient } from '../trainer/tinker/client';
import type { RunStore } from '../store/run-store';
import { publishAdapter, PublishError } from '../policy/publisher';
import { resolveSamplerWeights } from '../trainer/sampler-weights';
import { isSimulatedEnv } from '../sim-kind';

export const EXPORT_MANIFEST = 'harness-s-export.json';
export const SIMULATED_LABEL = 'SIMULATED: sim policy parameters, not a real LoRA adapter';

export interface ExportManifest {
  runId: string;
  step: number;
  policyVersion: string;
  samplerPath: string;
  baseModel: string;
  /** sha256 of the run's stored config as canonical JSON (keys sorted). */
  configHash: string;
  trainerModelId: string;
  exportedAt: string;
  simulated: boolean;
  label?: string;
}

export interface ExportCheck {
  /** The inference server's OpenAI base URL (…/v1). */
  server: string;
  adapterName: string;
  /** Mean |Δ| log-prob between the server's answer to the step's probe and the trainer's; null when skipped. */
  probeMeanAbsDiff: number | null;
  tolerance: number;
  /** Why the check did not run (a step without a probe). */
  skipped?: string;
  /** false: the server kept the throwaway adapter (its unload failed); say so, it holds GPU memory until unloaded. */
  unloaded: boolean;
}

/** Where and how to check an export: the run's inference server and the publish tolerance. */
export interface ExportCheckTarget {
  server: string;
  apiKey: string;
  tolerance: number;
}

/** JSON with object keys sorted at every depth: the same config hashes the same whatever its key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

export function configHash(config: unknown): string {
  return createHash('sha256').update(canonicalJson(config)).digest('hex');
}

/** "0..7" for a run of consecutive steps, else the list: what a user needs to pick another --step. */
export function describeSteps(steps: readonly number[]): string {
  if (steps.length === 0) return 'none';
  const consecutive = steps.every((s, i) => i === 0 || s === steps[i - 1] + 1);
  if (consecutive && steps.length > 2) return `${steps[0]}..${steps.at(-1)}`;
  return steps.join(', ');
}

/** The inference server a run publishes to first, as publishing picks it (an OpenAI base URL, …/v1). */
export function checkServerOf(config: { policy: { baseUrl: string; inferenceServers: string[] } }): string {
  return config.policy.inferenceServers[0] ?? config.policy.baseUrl;
}

export async function exportPolicy(
  deps: { store: RunStore; trainer: TinkerClient },
  args: { runId: string; step?: number; outDir: string; force?: boolean; check?: ExportCheckTarget; onProgress?: (line: string) => void },
): Promise<{ dir: string; manifest: ExportManifest; check: ExportCheck | null }> {
  const { store } = deps;
  const say = args.onProgress ?? (() => undefined);
  const run = await store.getRun(args.runId);
  if (!run) throw new UserError(`no run ${args.runId} in the run store (see \`harness-s run list\`)`);
  const config = parseStoredRunConfig(run.config, `stored config of ${args.runId}`);
  const steps = await store.trainedSteps(args.runId);
  const step = args.step ?? steps.at(-1);
  if (step === undefined) throw new UserError(`run ${args.runId} has no trained step yet: nothing to export`);
  const trained = await store.trainerStep(args.runId, step);
  if (!trained) throw new UserError(`run ${args.runId} has no trained step ${step}; its steps: ${describeSteps(steps)}`);

  const dir = path.resolve(args.outDir);
  const existing = await readdirOrNull(dir);
  if (existing && existing.length > 0 && !args.force)
    throw new UserError(`${dir} exists and is not empty; choose another --out, or --force to replace it`);

  // Everything is assembled beside the destination (the same filesystem), so the last move is a rename.
  await fs.mkdir(path.dirname(dir), { recursive: true });
  const tag = randomBytes(4).toString('hex');
  const unpackRoot = `${dir}.${tag}.unpack`;
  const staging = `${dir}.${tag}.partial`;
  const replaced = `${dir}.${tag}.replaced`;
  try {
    say(`unpacking the sampler weights of step ${step} (${trained.samplerPath})`);
    const unpacked = await resolveSamplerWeights({
      samplerPath: trained.samplerPath,
      trainer: deps.trainer,
      checkpointsDir: config.trainer.checkpointsDir,
      adapterDir: unpackRoot,
    });
    await fs.rename(unpacked, staging);
    // resolveSamplerWeights marks a complete unpack with its own dotfile; it is not part of the adapter.
    for (const name of await fs.readdir(staging)) if (name.startsWith('.harness-s')) await fs.rm(path.join(staging, name), { force: true });

    const adapterConfig = JSON.parse(await fs.readFile(path.join(staging, 'adapter_config.json'), 'utf8')) as { simulated?: unknown };
    const simulated = isSimulatedEnv(config.env.kind) || adapterConfig.simulated === true;
    const manifest: ExportManifest = {
      runId: args.runId,
      step,
      policyVersion: trained.policyVersion,
      samplerPath: trained.samplerPath,
      baseModel: config.policy.model,
      configHash: configHash(run.config),
      trainerModelId: trained.modelId,
      exportedAt: new Date().toISOString(),
      simulated,
      ...(simulated ? { label: SIMULATED_LABEL } : {}),
    };
    await fs.writeFile(path.join(staging, EXPORT_MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);

    let check: ExportCheck | null = null;
    if (args.check) {
      say(`checking it on ${args.check.server}: loading it as a LoRA adapter and comparing the step's probe log-probs with the trainer's`);
      check = await checkExport({ store }, { dir: staging, manifest, ...args.check }).catch((err: unknown) => {
        if (err instanceof UserError)
          throw new UserError(`${err.message}; nothing was written to ${dir} (--no-check exports without the check)`);
        throw err;
      });
    }

    // --force: the old folder is moved aside first and removed only once the new one is in place.
    if (existing) await fs.rename(dir, replaced);
    await fs.rename(staging, dir);
    return { dir, manifest, check };
  } finally {
    await fs.rm(staging, { recursive: true, force: true });
    await fs.rm(unpackRoot, { recursive: true, force: true });
    await fs.rm(replaced, { recursive: true, force: true });
  }
}

/**
 * Loads an exported folder into an inference server (its OpenAI base URL,
 * ending in /v1) under a throwaway name, checks it against the trainer's
 * probe of its step, and unloads it. A mismatch above the tolerance is a
 * UserError naming the measured difference.
 */
export async function checkExport(
  deps: { store: RunStore },
  args: { dir: string; manifest: ExportManifest } & ExportCheckTarget,
): Promise<ExportCheck> {
  const { server, tolerance } = args;
  const adapterName = `export-check-${args.manifest.runId}-${args.manifest.step}-${randomBytes(3).toString('hex')}`;
  const probe = (await deps.store.trainerStep(args.manifest.runId, args.manifest.step))?.probe ?? null;
  // publishAdapter without a probe only loads: nothing would be compared, so nothing is loaded.
  if (!probe) {
    return {
      server,
      adapterName,
      probeMeanAbsDiff: null,
      tolerance,
      unloaded: true,
      skipped: `the trainer stored no log-prob probe for step ${args.manifest.step} (it trained on no data)`,
    };
  }
  let result;
  try {
    result = await publishAdapter({ server, apiKey: args.apiKey, adapterName, adapterDir: args.dir, probe, tolerance });
  } catch (err) {
    await unloadAdapter(server, args.apiKey, adapterName);
    // The server refused or mis-served the adapter, or is not there: a user fixes that (or skips the check).
    if (err instanceof PublishError) throw new UserError(`the export check failed: ${err.message}`);
    throw err;
  }
  return {
    server,
    adapterName,
    probeMeanAbsDiff: result.probeMeanAbsDiff,
    tolerance,
    unloaded: await unloadAdapter(server, args.apiKey, adapterName),
  };
}

/** vLLM's POST /v1/unload_lora_adapter; true when the server no longer has the adapter. */
async function unloadAdapter(server: string, apiKey: string, adapterName: string): Promise<boolean> {
  try {
    const response = await fetch(`${server.replace(/\/+$/, '')}/unload_lora_adapter`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ lora_name: adapterName }),
      signal: AbortSignal.timeout(30_000),
    });
    // 404: it was never loaded (the load itself failed): nothing is left behind.
    return response.ok || response.status === 404;
  } catch {
    return false;
  }
}

async function readdirOrNull(dir: string): Promise<string[] | null> {
  try {
    return await fs.readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') throw new UserError(`${dir} is a file, not a folder; choose another --out`);
    throw err;
  }
}
