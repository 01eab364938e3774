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
import { resolveSamplerWeights } from '../trainer/sampler-weights';
import type { TinkerClient } from '../trainer/tinker/client';
import type { ReplicaStore } from '../store/replica-store';
import { countReplicaLoad } from '../metrics';

/** The folder under the adapter folder laid out as vLLM's LoRA filesystem resolver reads it: `<name>/adapter_config.json`. */
export const RESOLVER_FOLDER = 'lora-resolver';

export interface ReplicaLoadDeps {
  replicas: Pick<ReplicaStore, 'claim' | 'markReady' | 'markPending'>;
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

/**
 * How a load comes: `publish` (the step's publish, which holds the version's
 * row on the replica for as long as it works, whoever else claimed it), or a
 * keeper's `reload` (claimed first; `probed`: this replica already answered
 * this version's probe before it lost it, so the same files are loaded again
 * without one).
 */
export type LoadReason = { kind: 'publish'; holder: string } | { kind: 'reload'; holder: string; probed: boolean };

/** How often a load in progress renews its claim on the row (claims older than a minute are taken over). */
const CLAIM_RENEW_MS = 20_000;

export async function loadVersionOnReplica(
  deps: ReplicaLoadDeps,
  target: ReplicaVersionTarget,
  reason: LoadReason,
): Promise<PublishResult> {
  const { replica, policyVersion } = target;
  const claim = () => deps.replicas.claim(replica, policyVersion, reason.holder, reason.kind === 'publish');
  await claim();
  const renew = setInterval(() => void claim().catch(() => undefined), CLAIM_RENEW_MS);
  renew.unref();
  try {
    deps.onPhase?.('unpacking the sampler weights');
    const unpacked = await resolveSamplerWeights({
      samplerPath: target.samplerPath,
      trainer: deps.trainer,
      checkpointsDir: deps.checkpointsDir,
      adapterDir: deps.adapterDir,
    });
    const adapterDir = await resolverCopy(deps.adapterDir, unpacked, policyVersion, await servedModelPath(replica, deps.baseModel));
    const probed = reason.kind === 'reload' && reason.probed;
    const probe = probed ? null : await deps.probeOf(target.probeOf.runId, target.probeOf.step);
    // A keeper's first load of a version on a replica happens while the run samples: its traffic drains first (below).
    if (reason.kind === 'reload' && probe) await untilQuiet(replica, deps.signal);
    deps.onPhase?.(`loading on ${replica}`);
    const result = await publishAdapter({
      server: replica,
      apiKey: deps.apiKey,
      adapterName: policyVersion,
      adapterDir,
      probe,
      tolerance: deps.tolerance,
      signal: deps.signal,
    });
    await deps.replicas.markReady(replica, policyVersion, probed ? null : result.probeMeanAbsDiff);
    countReplicaLoad(replica, reason.kind, 'ok');
    return result;
  } catch (err) {
    countReplicaLoad(replica, reason.kind, 'error');
    await deps.replicas.markPending(replica, policyVersion, (err as Error).message).catch(() => undefined);
    throw err;
  } finally {
    clearInterval(renew);
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
    await fs.writeFile(
      path.join(staging, 'adapter_config.json'),
      `${JSON.stringify({ ...config, base_model_name_or_path: baseModel }, null, 2)}\n`,
    );
    await fs.rename(staging, target).catch(async (err: NodeJS.ErrnoException) => {
      // Another process laid it out first: its copy is complete (renamed whole).
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    });
  } finally {
    await fs.rm(staging, { recursive: true, force: true });
  }
  return target;
}

/** How long rollout workers may still take a replica to serve a version after the store says otherwise (their readiness cache, 2 s). */
const READINESS_CACHE_MS = 2500;
const QUIET_WAIT_MS = 60_000;

/**
 * Waits until a replica runs no request, before a reload's probe: vLLM's CPU
 * build kills its engine when a `prompt_logprobs` request is batched beside
 * LoRA decoding (an einsum shape error in its punica CPU kernels), which a
 * probe beside rollouts does. While a version reloads, its row is not ready,
 * so rollout workers stop sending it there once their readiness cache
 * expires; then vLLM's own gauges (`vllm:num_requests_running` and
 * `..._waiting` in /metrics) say when the rest has drained. A server without
 * those gauges (the sim) is not waited for; traffic for other runs' versions
 * may keep it busy, so the wait ends after a minute anyway.
 */
async function untilQuiet(replica: string, signal?: AbortSignal): Promise<void> {
  await sleep(READINESS_CACHE_MS, signal);
  const metricsUrl = `${replica.replace(/\/v1$/, '')}/metrics`;
  const deadline = Date.now() + QUIET_WAIT_MS;
  while (Date.now() < deadline) {
    const busy = await requestsOn(metricsUrl);
    if (busy === null || busy === 0) return;
    await sleep(250, signal);
  }
}

/** vLLM's running and waiting requests from its /metrics, or null when it has no such gauges. */
async function requestsOn(metricsUrl: string): Promise<number | null> {
  try {
    const response = await fetch(metricsUrl, { signal: AbortSignal.timeout(3000) });
    if (!response.ok) return null;
    const text = await response.text();
    const values = [...text.matchAll(/^vllm:num_requests_(?:running|waiting)\{[^}]*\}\s+([0-9.eE+-]+)$/gm)].map((m) => Number(m[1]));
    return values.length ? values.reduce((a, b) => a + b, 0) : null;
  } catch {
    return null;
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      },
      { once: true },
    );
  });
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
