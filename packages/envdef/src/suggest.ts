import { distance } from 'fastest-levenshtein';

/**
 * The closest candidate to `word` when it is close enough to be a plausible typo, else `undefined`.
 * "Close enough": a case-insensitive match, or an edit distance of at most 2 (at most 1 for words
 * of three letters or fewer, at most a third of the length for long words).
 *
 * @example
 * didYouMean('resorces', ['resources', 'run']) // 'resources'
 */
export function didYouMean(word: string, candidates: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = word.length <= 3 ? 1 : Math.max(2, Math.floor(word.length / 3));
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
