/**
 * A trained policy out of the service (`harness-s export`): the sampler
 * weights of a run's step as a LoRA adapter folder in the format vLLM and
 * PEFT load (adapter_config.json and the weights; on the sim, the SIMULATED
 * policy's parameters), with a manifest `harness-s-export.json` saying what
 * it is: run, step, policy version, base model, the hash of the run's config.
 *
 * The folder is written beside its destination and renamed into place, so a
 * failure leaves nothing half-written. The check loads it into an inference
 * server under a throwaway adapter name and compares its log-probs of the
 * step's publish probe with the trainer's, as publishing does, then unloads it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseStoredRunConfig } from '../config';
import { UserError } from '../errors';
import type { TinkerClient } from '../rl/tinker/client';
import type { RunStore } from '../store/run-store';
import { publishAdapter } from './publisher';
import { resolveSamplerWeights } from './sampler-weights';

export const EXPORT_MANIFEST = 'harness-s-export.json';
const SIMULATED_LABEL = 'SIMULATED: the sim policy\'s parameters, not a real LoRA adapter';

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
  server: string;
  adapterName: string;
  /** Mean |Δ| log-prob between the server's answer to the step's probe and the trainer's; null without a probe. */
  probeMeanAbsDiff: number | null;
  skipped?: string;
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

export async function exportPolicy(
  deps: { store: RunStore; trainer: TinkerClient },
  args: { runId: string; step?: number; outDir: string; force?: boolean },
): Promise<{ dir: string; manifest: ExportManifest }> {
  const { store } = deps;
  const run = await store.getRun(args.runId);
  if (!run) throw new UserError(`no run ${args.runId} in the run store (see \`harness-s run list\`)`);
  const config = parseStoredRunConfig(run.config, `stored config of ${args.runId}`);
  const steps = (await store.steps(args.runId)).map((s) => s.step);
  const step = args.step ?? steps.at(-1);
  if (step === undefined) throw new UserError(`run ${args.runId} has no trained step yet: nothing to export`);
  const trained = await store.trainerStep(args.runId, step);
  if (!trained) {
    throw new UserError(`run ${args.runId} has no trained step ${step}; its steps: ${steps.length ? `${steps[0]}..${steps.at(-1)}` : 'none'}`);
  }
  const dir = path.resolve(args.outDir);
  const existing = await fs.readdir(dir).catch(() => null);
  if (existing && existing.length > 0 && !args.force) throw new UserError(`${dir} exists and is not empty; choose another --out, or --force to replace it`);

  const unpackRoot = await fs.mkdtemp(path.join(os.tmpdir(), 'harness-s-export-'));
  const staging = `${dir}.${randomBytes(4).toString('hex')}.partial`;
  try {
    const unpacked = await resolveSamplerWeights({ samplerPath: trained.samplerPath, trainer: deps.trainer, checkpointsDir: config.trainer.checkpointsDir, adapterDir: unpackRoot });
    await fs.mkdir(path.dirname(dir), { recursive: true });
    await fs.cp(unpacked, staging, { recursive: true, filter: (source) => !path.basename(source).startsWith('.harness-s') });
    const adapterConfig = JSON.parse(await fs.readFile(path.join(staging, 'adapter_config.json'), 'utf8')) as { simulated?: unknown };
    const simulated = config.env.kind === 'sim' || adapterConfig.simulated === true;
    const manifest: ExportManifest = {
      runId: args.runId, step, policyVersion: trained.policyVersion, samplerPath: trained.samplerPath, baseModel: config.policy.model,
      configHash: configHash(run.config), trainerModelId: trained.modelId, exportedAt: new Date().toISOString(), simulated,
      ...(simulated ? { label: SIMULATED_LABEL } : {}),
    };
    await fs.writeFile(path.join(staging, EXPORT_MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
    if (existing) await fs.rm(dir, { recursive: true, force: true });
    await fs.rename(staging, dir);
    return { dir, manifest };
  } finally {
    await fs.rm(staging, { recursive: true, force: true });
    await fs.rm(unpackRoot, { recursive: true, force: true });
  }
}

/**
 * Loads an exported folder into an inference server (its OpenAI base URL,
 * ending in /v1) under a throwaway name, checks it against the trainer's
 * probe of its step, and unloads it.
 */
export async function checkExport(
  deps: { store: RunStore },
  args: { dir: string; manifest: ExportManifest; server: string; apiKey: string; tolerance: number },
): Promise<ExportCheck> {
  const adapterName = `export-check-${args.manifest.runId}-${args.manifest.step}-${randomBytes(3).toString('hex')}`;
  const probe = (await deps.store.trainerStep(args.manifest.runId, args.manifest.step))?.probe ?? null;
  if (!probe) return { server: args.server, adapterName, probeMeanAbsDiff: null, skipped: `step ${args.manifest.step} has no publish probe (it trained on nothing)` };
  try {
    const result = await publishAdapter({ server: args.server, apiKey: args.apiKey, adapterName, adapterDir: args.dir, probe, tolerance: args.tolerance });
    return { server: args.server, adapterName, probeMeanAbsDiff: result.probeMeanAbsDiff };
  } finally {
    await fetch(`${args.server.replace(/\/+$/, '')}/unload_lora_adapter`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${args.apiKey}` }, body: JSON.stringify({ lora_name: adapterName }),
      signal: AbortSignal.timeout(30_000),
    }).catch(() => undefined);
  }
}
