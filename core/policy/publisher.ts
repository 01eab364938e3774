/**
 * Publishes a policy version to every inference server as a LoRA adapter,
 * through vLLM's runtime LoRA API (/v1/load_lora_adapter). Idempotent: an
 * adapter the server already has counts as published.
 */
export class PublishError extends Error {
  override name = 'PublishError';
}

export async function publishLoraAdapter(serverBaseUrl: string, apiKey: string, adapterName: string, loraPath: string): Promise<void> {
  const url = `${serverBaseUrl.replace(/\/$/, '')}/load_lora_adapter`;
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ lora_name: adapterName, lora_path: loraPath }),
  });
  if (response.ok) return;
  const text = await response.text();
  if (response.status === 400 && text.includes('has already been loaded')) return;
  throw new PublishError(`${url}: HTTP ${response.status}: ${text.slice(0, 500)}`);
}

/** The adapter name a step's weights are published under. */
export function policyVersionName(runId: string, step: number): string {
  return `${runId}-step-${step}`;
}
