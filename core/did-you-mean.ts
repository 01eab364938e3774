/** What to tell a user who wrote a key that does not exist: the nearest known one, or the known ones. */
import { closest, distance } from 'fastest-levenshtein';

/** "; did you mean X?" when a known key differs only in case, is cut short, or is a typo or two away, else "; known here: …". */
export function unknownKeyHint(key: string, known: readonly string[]): string {
  if (known.length === 0) return '';
  const nearest = likelyMeant(key, known);
  return nearest === undefined ? `; known here: ${known.join(', ')}` : `; did you mean ${nearest}?`;
}

/** The known word `word` was likely meant as: one that differs only in case, that it cuts short, or a typo or two away; none else. */
export function likelyMeant(word: string, known: readonly string[]): string | undefined {
  if (known.length === 0 || word.length === 0) return undefined;
  const lower = word.toLowerCase();
  const sameLetters =
    known.find((k) => k.toLowerCase() === lower) ?? known.find((k) => lower.length >= 3 && k.toLowerCase().startsWith(lower));
  if (sameLetters) return sameLetters;
  const nearest = closest(word, [...known]);
  const typoBudget = Math.max(1, Math.floor(word.length / 3));
  return distance(lower, nearest.toLowerCase()) <= typoBudget ? nearest : undefined;
}
