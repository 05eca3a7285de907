/** One problem a schema found, as zod reports it (only what the CLI prints of it). */
export interface Issue {
  readonly path: readonly PropertyKey[];
  readonly message: string;
}

/** How many problems a message lists; the rest are counted. */
const SHOWN = 3;

/**
 * The first few problems a schema found, for one line of an error message: each as
 * `where: what` (`environments[0].state: Invalid option: ...`), then how many more there are.
 * Names the fields, never their values (a value may be a secret).
 *
 * @example
 * describeIssues([{ path: ['contexts', 'a'], message: 'Invalid input: expected object, received null' }])
 * // 'contexts.a: Invalid input: expected object, received null'
 */
export function describeIssues(issues: readonly Issue[], top = 'the top level'): string {
  const shown = issues.slice(0, SHOWN).map((i) => `${fieldPath(i.path) || top}: ${i.message}`);
  const more = issues.length - shown.length;
  return `${shown.join('; ')}${more > 0 ? `; and ${more} more` : ''}`;
}

/** `environments[0].spec.cpus`; a key that is not a plain name is quoted (`contexts["a b"]`). */
function fieldPath(path: readonly PropertyKey[]): string {
  return path
    .map((key, i) => {
      if (typeof key === 'number') return `[${key}]`;
      const name = String(key);
      if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return i === 0 ? name : `.${name}`;
      return `[${JSON.stringify(name)}]`;
    })
    .join('');
}
