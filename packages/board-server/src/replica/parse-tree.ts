import { boardError } from '../errors.js';

/**
 * Parses `json_serialize_sql`'s output. DuckDB writes a DOUBLE constant that is not finite
 * (`SELECT 1e400`) as a bare `Infinity`, `-Infinity` or `NaN`, which is not JSON; the checks read
 * only the tree's shape, so such tokens outside strings are read as `null`.
 */
export function parseTreeJson(text: string): {
  error?: boolean;
  error_message?: string;
  statements?: unknown[];
} {
  try {
    return JSON.parse(text);
  } catch {
    try {
      return JSON.parse(nonFiniteToNull(text));
    } catch {
      throw boardError(
        'QueryRefused',
        "the query could not be checked: DuckDB's parse tree of it is unreadable",
      );
    }
  }
}

/** `text` with the bare tokens `Infinity`, `-Infinity` and `NaN` outside JSON strings replaced by `null`. */
export function nonFiniteToNull(text: string): string {
  let out = '';
  let from = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else {
      const token = text.startsWith('-Infinity', i)
        ? '-Infinity'
        : text.startsWith('Infinity', i)
          ? 'Infinity'
          : text.startsWith('NaN', i)
            ? 'NaN'
            : undefined;
      if (token) {
        out += `${text.slice(from, i)}null`;
        i += token.length - 1;
        from = i + 1;
      }
    }
  }
  return out + text.slice(from);
}
