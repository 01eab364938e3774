/** What to tell a user who wrote a key that does not exist: the nearest known one, or the known ones. */
import { closest, distance } from 'fastest-levenshtein';

/** "; did you mean X?" when a known key differs only in case, is cut short, or is a typo or two away, else "; known here: …". */
export function unknownKeyHint(key: string, known: readonly string[]): string {
  if (known.length === 0) return '';
  const lower = key.toLowerCase();
  const sameLetters =
    known.find((k) => k.toLowerCase() === lower) ?? known.find((k) => lower.length >= 3 && k.toLowerCase().startsWith(lower));
  const nearest = sameLetters ?? closest(key, [...known]);
  const typoBudget = Math.max(1, Math.floor(key.length / 3));
  if (sameLetters || distance(key.toLowerCase(), nearest.toLowerCase()) <= typoBudget) return `; did you mean ${nearest}?`;
  return `; known here: ${known.join(', ')}`;
}
