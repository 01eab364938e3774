/** What an inference replica serves, as it says itself (GET /v1/models: the base model and the adapters it has loaded). */

/** The model ids a replica lists, or null when it does not answer in time. */
export async function listReplicaModels(replica: string, timeoutMs = 3000): Promise<Set<string> | null> {
  try {
    const response = await fetch(`${replica}/models`, { signal: AbortSignal.timeout(timeoutMs) });
    if (!response.ok) return null;
    const body = (await response.json()) as { data?: Array<{ id?: unknown }> };
    return new Set((body.data ?? []).flatMap((m) => (typeof m.id === 'string' ? [m.id] : [])));
  } catch {
    return null;
  }
}
