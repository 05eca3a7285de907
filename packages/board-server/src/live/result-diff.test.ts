import { applyLiveDiff, type Cell } from '@board/protocol';
import { describe, expect, it } from 'vitest';
import { diffRows } from './result-diff.js';

/** A deterministic PRNG (mulberry32). */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The diff event the node sends for `prev` -> `next`, applied as a client does. */
function roundTrip(prev: Cell[][], next: Cell[][]): Cell[][] {
  const texts = (rows: Cell[][]) => rows.map((r) => JSON.stringify(r));
  const { removed, added } = diffRows(texts(prev), texts(next));
  const wire = JSON.parse(JSON.stringify({ removed, added: added.map((i) => [i, next[i]]) })) as {
    removed: number[];
    added: [number, Cell[]][];
  };
  return applyLiveDiff(prev, wire);
}

describe('whole-row diffs', () => {
  it('rebuild the next result exactly, for random results with duplicates and reorderings', () => {
    const random = prng(7);
    const row = (): Cell[] => [`k${Math.floor(random() * 8)}`, Math.floor(random() * 3)];
    for (let n = 0; n < 2000; n++) {
      const prev = Array.from({ length: Math.floor(random() * 12) }, row);
      let next = prev.filter(() => random() < 0.7);
      next = next.flatMap((r) => (random() < 0.2 ? [row(), r] : [r]));
      if (random() < 0.3) next.reverse();
      if (random() < 0.1) next = Array.from({ length: Math.floor(random() * 12) }, row);
      expect(roundTrip(prev, next)).toEqual(next);
    }
  });

  it('names a changed row as removed at its old position and added at its new one', () => {
    expect(diffRows(['["a",1]', '["b",2]', '["c",3]'], ['["a",1]', '["b",5]', '["c",3]'])).toEqual({
      removed: [1],
      added: [1],
    });
    expect(diffRows(['[1]'], ['[1]'])).toEqual({ removed: [], added: [] });
  });

  it('refuses a diff that does not fit the rows it is applied to', () => {
    expect(() => applyLiveDiff([[1]], { removed: [3], added: [] })).toThrow(RangeError);
    expect(() => applyLiveDiff([[1]], { removed: [], added: [[5, [2]]] })).toThrow(RangeError);
  });
});
