/** What an inference replica serves, as it says itself (GET /v1/models: the base model and the adapters it has loaded). */

/**
 * The model ids a replica lists; 'unauthorized' when it answers 401 or 403
 * (it is up, but wants another key); null when it does not answer in time or
 * answers anything else.
 */
export async function listReplicaModels(
  replica: string,
  options: { timeoutMs?: number; apiKey?: string } = {},
): Promise<Set<string> | 'unauthorized' | null> {
  try {
    const headers: Record<string, string> = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {};
    const response = await fetch(`${replica}/models`, { headers, signal: AbortSignal.timeout(options.timeoutMs ?? 3000) });
    if (response.status === 401 || response.status === 403) return 'unauthorized';
    if (!response.ok) return null;
    const body = (await response.json()) as { data?: Array<{ id?: unknown }> };
    return new Set((body.data ?? []).flatMap((m) => (typeof m.id === 'string' ? [m.id] : [])));
  } catch {
    return null;
  }
}
