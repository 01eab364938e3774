/**
 * Loads a policy version on one inference replica and records it: the step's
 * sampler weights unpacked into this process's adapter folder (from the
 * trainer's checkpoints folder when it is mounted here, else downloaded
 * through the Tinker API), laid out for vLLM's LoRA filesystem resolver too,
 * loaded on the replica (/v1/load_lora_adapter), checked by the step's probe
 * (core/policy/publisher.ts), and marked ready in the run store, so rollout
 * workers send the version's turns there. A load that fails leaves the
 * version pending on that replica; its keeper tries again.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { AdapterProbe } from '../policy/adapter-probe';
import { publishAdapter, type PublishResult } from '../policy/publisher';
import type { ReplicaVersionTarget } from '../policy/replicas';
import { resolveSamplerWeights } from '../policy/sampler-weights';
import type { TinkerClient } from '../rl/tinker/client';
import type { ReplicaStore } from '../store/replica-store';
import { countReplicaLoad } from '../metrics';

/** The folder under the adapter folder laid out as vLLM's LoRA filesystem resolver reads it: `<name>/adapter_config.json`. */
export const RESOLVER_FOLDER = 'lora-resolver';

export interface ReplicaLoadDeps {
  replicas: Pick<ReplicaStore, 'markReady' | 'markPending'>;
  /** The probe of a trainer step (the run store's trainer_steps row). */
  probeOf(runId: string, step: number): Promise<AdapterProbe | null>;
  /** Downloads the sampler weights when the checkpoints folder does not have them. */
  trainer: TinkerClient;
  /** The trainer's checkpoints folder as this process sees it (trainer.checkpointsDir), if any. */
  checkpointsDir?: string;
  /** This process's adapter folder. */
  adapterDir: string;
  /** The inference servers' API key. */
  apiKey: string;
  /** policy.probeTolerance. */
  tolerance: number;
  /** The model the replicas serve (policy.model). */
  baseModel: string;
  signal?: AbortSignal;
  onPhase?(phase: string): void;
}

export async function loadVersionOnReplica(deps: ReplicaLoadDeps, target: ReplicaVersionTarget, reason: 'publish' | 'reload'): Promise<PublishResult> {
  const { replica, policyVersion } = target;
  try {
    deps.onPhase?.('unpacking the sampler weights');
    const unpacked = await resolveSamplerWeights({
      samplerPath: target.samplerPath, trainer: deps.trainer, checkpointsDir: deps.checkpointsDir, adapterDir: deps.adapterDir,
    });
    const adapterDir = await resolverCopy(deps.adapterDir, unpacked, policyVersion, await servedModelPath(replica, deps.baseModel));
    const probe = await deps.probeOf(target.probeOf.runId, target.probeOf.step);
    deps.onPhase?.(`loading on ${replica}`);
    const result = await publishAdapter({
      server: replica, apiKey: deps.apiKey, adapterName: policyVersion, adapterDir, probe, tolerance: deps.tolerance, signal: deps.signal,
    });
    await deps.replicas.markReady(replica, policyVersion, result.probeMeanAbsDiff);
    countReplicaLoad(replica, reason, 'ok');
    return result;
  } catch (err) {
    countReplicaLoad(replica, reason, 'error');
    await deps.replicas.markPending(replica, policyVersion, (err as Error).message).catch(() => undefined);
    throw err;
  }
}

/**
 * The adapter as `<adapterDir>/lora-resolver/<policy version>/`, the layout
 * vLLM's LoRA filesystem resolver loads an unknown adapter name from (set
 * VLLM_LORA_RESOLVER_CACHE_DIR to that folder): a restarted vLLM then loads
 * the current version by itself on its first request for it. The resolver
 * checks that adapter_config.json names the served model, so the copy's
 * base_model_name_or_path is set to it; the weights are hard links (a copy
 * across file systems). Replicas load this folder, so both ways load the
 * same files.
 */
export async function resolverCopy(adapterDir: string, unpacked: string, policyVersion: string, baseModel: string): Promise<string> {
  const target = path.join(path.resolve(adapterDir), RESOLVER_FOLDER, policyVersion);
  const configFile = path.join(target, 'adapter_config.json');
  if (await exists(configFile)) return target;
  const staging = `${target}.${process.pid}.${Date.now()}.partial`;
  await fs.mkdir(staging, { recursive: true });
  try {
    for (const entry of await fs.readdir(unpacked, { withFileTypes: true })) {
      if (entry.name === 'adapter_config.json' || entry.name.startsWith('.')) continue;
      const from = path.join(unpacked, entry.name);
      const to = path.join(staging, entry.name);
      if (entry.isDirectory()) await fs.cp(from, to, { recursive: true });
      else await fs.link(from, to).catch(() => fs.copyFile(from, to));
    }
    const config = JSON.parse(await fs.readFile(path.join(unpacked, 'adapter_config.json'), 'utf8')) as Record<string, unknown>;
    await fs.writeFile(path.join(staging, 'adapter_config.json'), `${JSON.stringify({ ...config, base_model_name_or_path: baseModel }, null, 2)}\n`);
    await fs.rename(staging, target).catch(async (err: NodeJS.ErrnoException) => {
      // Another process laid it out first: its copy is complete (renamed whole).
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    });
  } finally {
    await fs.rm(staging, { recursive: true, force: true });
  }
  return target;
}

/**
 * What vLLM's resolver compares an adapter's base model with: the path or hub
 * id the replica loaded its model from (`root` of the base model in
 * /v1/models; `--model`, not `--served-model-name`). The served name when the
 * replica does not say.
 */
async function servedModelPath(replica: string, baseModel: string): Promise<string> {
  try {
    const response = await fetch(`${replica}/models`, { signal: AbortSignal.timeout(5000) });
    const body = (await response.json()) as { data?: Array<{ id?: unknown; root?: unknown }> };
    const root = body.data?.find((m) => m.id === baseModel)?.root;
    return typeof root === 'string' && root.length > 0 ? root : baseModel;
  } catch {
    return baseModel;
  }
}

async function exists(file: string): Promise<boolean> {
  return fs.stat(file).then(
    () => true,
    () => false,
  );
}
