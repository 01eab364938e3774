/**
 * Seeded randomness for everything that must replay the same way: task
 * sampling, rollout seeds, the sim policy's sampling.
 */

/** mulberry32: a small, well-known 32-bit PRNG; pure and fast. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a over the parts' text, to derive independent seeds from (seed, step, ...). */
export function hashSeed(...parts: Array<string | number>): number {
  let h = 0x811c9dc5;
  for (const ch of parts.join('\u0000')) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * Draws `count` distinct items (fewer if the pool is smaller) by a partial
 * Fisher-Yates shuffle seeded from (seed, step).
 */
export function drawDistinct<T>(pool: readonly T[], count: number, seed: number, step: number): T[] {
  const random = mulberry32(hashSeed('tasks', seed, step));
  const items = pool.slice();
  const n = Math.min(count, items.length);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(random() * (items.length - i));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items.slice(0, n);
}
