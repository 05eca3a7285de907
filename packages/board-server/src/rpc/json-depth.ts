/**
 * Deepest nesting of arrays and objects a request body may have. No procedure's input needs more
 * than 4 (`mutate.update`: `{ updates: [{ id, patch: { column: cell } }] }`); past this bound the
 * body is refused before `JSON.parse`, whose time grows badly with depth (40 MB of `[[[...]]]`
 * took 25 s, with the event loop blocked).
 */
export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * True when the JSON text in `body` (UTF-8 bytes) nests arrays and objects deeper than `max`
 * outside strings. One pass over the bytes, stopping at the first level past `max`; it does not
 * validate the JSON (`JSON.parse` does that next). The bytes it looks for are ASCII, which UTF-8
 * never uses inside a multi-byte character.
 * @example tooDeep(Buffer.from('[[1]]'), 1) // true
 */
export function tooDeep(body: Buffer, max: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  const n = body.length;
  for (let i = 0; i < n; i++) {
    const c = body[i];
    if (c === QUOTE) {
      // Skip the string: to the next quote that no backslash escapes. (A per-byte loop: memchr via
      // `indexOf` was faster on one long string but slower on many short ones, a mutation's rows.)
      for (i++; i < n; i++) {
        const s = body[i];
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) {
      depth--;
    }
  }
  return false;
}
