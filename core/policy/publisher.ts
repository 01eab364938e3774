/**
 * Publishes a policy version to an inference server as a LoRA adapter,
 * through vLLM's runtime LoRA API (/v1/load_lora_adapter with a local
 * directory), then checks it: the server's log-probs of the step's probe
 * sequence must match the trainer's. An adapter name the server already has
 * (a retried publish) is checked the same way and loaded again in place when
 * it serves other weights, so stale weights are never served silently.
 */
import { z } from 'zod';
import { type AdapterProbe, probeMeanAbsDiff } from './adapter-probe';

export class PublishError extends Error {
  override name = 'PublishError';
  constructor(
    message: string,
    /** false: retrying will not help (the server refuses the adapter). */
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

export interface PublishResult {
  server: string;
  /** Mean |served - trainer| log-prob over the probe; null without a probe. */
  probeMeanAbsDiff: number | null;
  /** The server had the name with other weights, and loaded the step's in place. */
  reloaded: boolean;
}

/** The adapter name a step's weights are published under: unique to (run, trainer model, step). */
export function policyVersionName(runId: string, trainerModelId: string, step: number): string {
  return `${runId}-${trainerModelId}-step-${step}`;
}

const PromptLogprobs = z.object({
  choices: z
    .array(z.object({ prompt_logprobs: z.array(z.record(z.string(), z.object({ logprob: z.number() })).nullable()).nullish() }))
    .min(1),
});

/** What vLLM says of an adapter it can never load: load_lora_adapter answers these with HTTP 500. */
const ADAPTER_REFUSED =
  /greater than max_lora_rank|must be a positive integer|vLLM does not (yet )?support|Unsupported modules_to_save|Adapter bias is not supported|Missing required configuration fields|doesn't contain tensors|is missing weight|LoRAAdapterNotFoundError|Loading lora .* failed: No adapter found/i;

export async function publishAdapter(args: {
  server: string;
  apiKey: string;
  adapterName: string;
  adapterDir: string;
  probe: AdapterProbe | null;
  tolerance: number;
  signal?: AbortSignal;
}): Promise<PublishResult> {
  const { server, adapterName } = args;
  const base = server.replace(/\/+$/, '');
  const loaded = await loadAdapter(args, false);
  // Without a probe a name the server had cannot be checked: load the step's weights in place.
  if (!args.probe) {
    if (loaded === 'already-loaded') await loadAdapter(args, true);
    return { server, probeMeanAbsDiff: null, reloaded: loaded === 'already-loaded' };
  }
  let diff = await measure(args, args.probe);
  if (diff <= args.tolerance) return { server, probeMeanAbsDiff: diff, reloaded: false };
  if (loaded === 'already-loaded') {
    await loadAdapter(args, true);
    diff = await measure(args, args.probe);
    if (diff <= args.tolerance) return { server, probeMeanAbsDiff: diff, reloaded: true };
  }
  throw new PublishError(
    `${base}: adapter '${adapterName}' answers the probe with log-probs ${formatDiff(diff)} (mean |Δ|) away from the trainer's, ` +
      `above the tolerance ${args.tolerance} (policy.probeTolerance): the server does not serve the weights the trainer saved ` +
      '(a stale adapter, another base model, or numerics far apart)',
    true,
  );
}

async function loadAdapter(
  args: { server: string; apiKey: string; adapterName: string; adapterDir: string; signal?: AbortSignal },
  inplace: boolean,
) {
  const url = `${args.server.replace(/\/+$/, '')}/load_lora_adapter`;
  const response = await post(
    url,
    args.apiKey,
    { lora_name: args.adapterName, lora_path: args.adapterDir, ...(inplace ? { load_inplace: true } : {}) },
    args.signal,
  );
  if (response.ok) return 'loaded' as const;
  const text = await response.text();
  if (response.status === 400 && /already been loaded/i.test(text)) return 'already-loaded' as const;
  // 4xx: the server refuses this adapter (no LoRA support, a bad request): retrying cannot help. vLLM answers an
  // adapter its engine refuses (rank above --max-lora-rank, unsupported features, missing tensors) with a 500.
  const refused = ADAPTER_REFUSED.test(text);
  const retryable = !refused && (response.status >= 500 || response.status === 408 || response.status === 429);
  throw new PublishError(`${url}: HTTP ${response.status}: ${text.slice(0, 500)}`, retryable);
}

/** The server's log-probs of the probe sequence under the adapter, compared with the trainer's. */
async function measure(
  args: { server: string; apiKey: string; adapterName: string; signal?: AbortSignal },
  probe: AdapterProbe,
): Promise<number> {
  const url = `${args.server.replace(/\/+$/, '')}/completions`;
  const response = await post(
    url,
    args.apiKey,
    { model: args.adapterName, prompt: probe.tokens, max_tokens: 1, temperature: 0, prompt_logprobs: 0 },
    args.signal,
  );
  const text = await response.text();
  if (!response.ok)
    throw new PublishError(
      `${url}: probe of adapter '${args.adapterName}': HTTP ${response.status}: ${text.slice(0, 500)}`,
      response.status >= 500,
    );
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new PublishError(`${url}: probe answer is not JSON: ${text.slice(0, 200)}`, false);
  }
  const parsed = PromptLogprobs.safeParse(body);
  const perPosition = parsed.success ? parsed.data.choices[0].prompt_logprobs : null;
  if (!perPosition) {
    throw new PublishError(
      `${url}: the server returned no prompt_logprobs for the probe; the publish check needs vLLM's prompt_logprobs on /v1/completions`,
      false,
    );
  }
  const served = probe.tokens.map((id, i) => perPosition[i]?.[String(id)]?.logprob ?? null);
  return probeMeanAbsDiff(probe, served);
}

function post(url: string, apiKey: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify(body),
    signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(120_000)]) : AbortSignal.timeout(120_000),
  }).catch((err: unknown) => {
    signal?.throwIfAborted();
    const cause = (err as { cause?: { code?: string } }).cause;
    throw new PublishError(`${url}: cannot reach the inference server (${cause?.code ?? (err as Error).message})`, true);
  });
}

function formatDiff(diff: number): string {
  return Number.isFinite(diff) ? diff.toFixed(4) : 'infinitely (a probe token has no log-prob)';
}
