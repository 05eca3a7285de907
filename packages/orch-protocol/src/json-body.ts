import { OrchError } from './errors.js';

/**
 * `JSON.parse` makes `"__proto__"` an ordinary own key, but zod's `record` and object schemas skip
 * it (they must not assign it), so a service, secret, env variable or label of that name would
 * vanish without a word: a manifest with one service named `__proto__` read as no services at all.
 * No field of the API has a use for the name, so orchd and the agent refuse it before validation.
 */

/** A value seen on the walk, with how it was reached (for the path of the answer). */
interface Seen {
  readonly value: object;
  readonly key: string;
  readonly up: Seen | undefined;
}

/**
 * The dotted path (`services.__proto__`, as zod issues name fields) of the first `__proto__` own
 * key in a parsed JSON value, or undefined when it has none. Iterative, so any nesting depth the
 * body limit lets through is walked without recursion.
 *
 * @example protoKeyPath(JSON.parse('{"a":[{"__proto__":1}]}')) // 'a.0.__proto__'
 */
export function protoKeyPath(json: unknown): string | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  const stack: Seen[] = [{ value: json, key: '', up: undefined }];
  for (let seen = stack.pop(); seen; seen = stack.pop()) {
    if (!Array.isArray(seen.value) && Object.hasOwn(seen.value, '__proto__')) {
      const path = ['__proto__'];
      for (let at: Seen | undefined = seen; at?.up; at = at.up) path.push(at.key);
      return path.reverse().join('.');
    }
    for (const [key, item] of Object.entries(seen.value)) {
      if (typeof item === 'object' && item !== null) stack.push({ value: item, key, up: seen });
    }
  }
  return undefined;
}

/** What is wrong with a `__proto__` key at `path`, for the `invalid_argument` answer. */
export function protoKeyProblem(path: string): string {
  return `${path}: "__proto__" is not accepted as a name (no field takes it)`;
}

/**
 * A request body of orchd or the agent as JSON: empty, not JSON, or holding a `__proto__` key is
 * `invalid_argument` saying which (`details.path` names the key); the route's schema checks the rest.
 *
 * @example parseJsonBody(await c.req.text())
 */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === '') throw OrchError.invalid('the request body is empty: send a JSON object');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw OrchError.invalid(`the request body is not valid JSON: ${(err as Error).message}`);
  }
  const path = protoKeyPath(json);
  if (path !== undefined)
    throw OrchError.invalid(protoKeyProblem(path), { field: path.split('.')[0] ?? path, path });
  return json;
}
