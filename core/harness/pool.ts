/**
 * The rules of a harness pool, written once: a pool has exactly one base
 * harness (the one the policy is trained and evaluated under) and its
 * siblings (the rescue candidates, one repair direction each); it is listed
 * base first. A run may name a subset of its env's pool (`harnessPool` in the
 * run config), which must keep the base.
 */
import type { RepairDirection } from './direction';

interface PoolMember {
  readonly id: string;
  readonly direction: RepairDirection;
}

/** What breaks the one-base rule, or null when the pool keeps it. */
export function basePoolIssue(pool: readonly PoolMember[]): string | null {
  const bases = pool.filter((h) => h.direction === 'base').length;
  return bases === 1 ? null : `a harness pool needs exactly one base harness (direction 'base'); found ${bases}`;
}

/** The pool listed base first, siblings in their order. */
export function baseFirst<T extends PoolMember>(pool: readonly T[]): T[] {
  return [...pool.filter((h) => h.direction === 'base'), ...pool.filter((h) => h.direction !== 'base')];
}

/** The pool's base harness and its siblings; a pool that breaks the one-base rule is refused with `fail`. */
export function splitPool<T extends PoolMember>(
  pool: readonly T[],
  fail: (message: string) => Error = (m) => new Error(m),
): { base: T; siblings: T[] } {
  const issue = basePoolIssue(pool);
  if (issue) throw fail(issue);
  return { base: pool.find((h) => h.direction === 'base')!, siblings: pool.filter((h) => h.direction !== 'base') };
}

/**
 * The harnesses a run names, in its order, from its env's pool; an empty
 * list means the whole pool. Unknown ids are refused, naming what the env has.
 */
export function selectPool<T extends PoolMember>(
  all: readonly T[],
  ids: readonly string[],
): { pool: T[]; unknown: Array<{ index: number; id: string }> } {
  if (ids.length === 0) return { pool: [...all], unknown: [] };
  const unknown = ids.flatMap((id, index) => (all.some((h) => h.id === id) ? [] : [{ index, id }]));
  return { pool: ids.flatMap((id) => all.filter((h) => h.id === id)), unknown };
}
