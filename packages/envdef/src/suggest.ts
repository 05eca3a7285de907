import { distance } from 'fastest-levenshtein';

/**
 * The closest candidate to `word` when it is close enough to be a plausible typo, else `undefined`.
 * "Close enough": an edit distance of at most a third of the word's length (at least 1), or a
 * case-insensitive match.
 *
 * @example
 * didYouMean('resorces', ['resources', 'run']) // 'resources'
 */
export function didYouMean(word: string, candidates: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(word.length / 3));
  for (const candidate of candidates) {
    if (candidate.toLowerCase() === lower) return candidate;
    const d = distance(lower, candidate.toLowerCase());
    if (d <= bestDistance && (best === undefined || d < bestDistance)) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}
