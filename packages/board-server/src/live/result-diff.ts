/**
 * The change from one result to the next, by whole row (a row is its encoded JSON text): which
 * positions of `prev` are gone, and which positions of `next` hold rows that are new. The rows of
 * `prev` that are kept appear in `next` in the same order, so `next` is `prev` without `removed`,
 * with the `added` rows inserted at their positions (`@board/protocol`'s `applyLiveDiff`).
 *
 * Greedy and linear: each row of `next`, in order, takes the first equal row of `prev` after the
 * last one taken, else it is added. A row moved against the order of the others counts as removed
 * and added (still exact, only larger); the caller sends the whole result when the diff is not
 * smaller than it.
 *
 * @example
 * diffRows(['[1]', '[2]', '[3]'], ['[1]', '[4]', '[3]']); // { removed: [1], added: [1] }
 */
export function diffRows(
  prev: readonly string[],
  next: readonly string[],
): { removed: number[]; added: number[] } {
  const positions = new Map<string, number[]>();
  for (let i = 0; i < prev.length; i++) {
    const text = prev[i]!;
    const list = positions.get(text);
    if (list) list.push(i);
    else positions.set(text, [i]);
  }
  /** Per row text: the index into its positions of the first one not yet passed. */
  const cursors = new Map<string, number>();
  const kept = new Uint8Array(prev.length);
  const added: number[] = [];
  let last = -1;
  for (let j = 0; j < next.length; j++) {
    const text = next[j]!;
    const list = positions.get(text);
    let match = -1;
    if (list) {
      let c = cursors.get(text) ?? 0;
      while (c < list.length && list[c]! <= last) c++;
      if (c < list.length) {
        match = list[c]!;
        c++;
      }
      cursors.set(text, c);
    }
    if (match < 0) added.push(j);
    else {
      kept[match] = 1;
      last = match;
    }
  }
  const removed: number[] = [];
  for (let i = 0; i < prev.length; i++) if (kept[i] === 0) removed.push(i);
  return { removed, added };
}
