/**
 * Runs `work` over `items` with at most `limit` at a time; rejects on the first
 * failure. Once `signal` aborts, no new item starts.
 */
export async function mapWithConcurrency<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      signal?.throwIfAborted();
      const item = items[next++];
      await work(item);
    }
  });
  await Promise.all(lanes);
}
