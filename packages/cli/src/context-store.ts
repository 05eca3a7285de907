import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { headerToken } from '@orch/protocol';
import { z } from 'zod';
import { CliError } from './errors.js';
import { describeIssues } from './issues.js';

/** One orchestrator the CLI can talk to. `master` marks the token as the master token. */
export interface Context {
  readonly url: string;
  readonly token?: string;
  readonly master: boolean;
}

export interface ContextsFile {
  current?: string;
  contexts: Record<string, Context>;
}

/** The longest token the CLI sends (a bearer token travels in one header line). */
export const MAX_TOKEN_LENGTH = 8192;

/**
 * A bearer token: visible ASCII only, at most {@link MAX_TOKEN_LENGTH} characters. Anything else
 * cannot travel in the `Authorization` header, and fetch's complaint about it would quote it.
 */
export const Token = headerToken(MAX_TOKEN_LENGTH);

/** Why `token` cannot be sent, without quoting it; undefined when it can. */
export function tokenProblem(token: string): string | undefined {
  const parsed = Token.safeParse(token);
  return parsed.success ? undefined : parsed.error.issues[0]?.message;
}

/** The orchestrator URL as `connect` saves it: an http or https origin (`http://127.0.0.1:8080`). */
const Origin = z.string().check((ctx) => {
  let url: URL | undefined;
  try {
    url = new URL(ctx.value);
  } catch {
    url = undefined;
  }
  if (
    !url ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.username ||
    url.password ||
    url.pathname !== '/' ||
    url.search ||
    url.hash
  )
    ctx.issues.push({
      code: 'custom',
      message: 'must be an http or https origin, for example http://127.0.0.1:8080',
      input: ctx.value,
    });
});

const ContextEntry = z.object({ url: Origin, token: Token.optional(), master: z.boolean() });
const FileShape = z.object({
  current: z.string().optional(),
  contexts: z.custom<Record<string, unknown>>(
    (v) => typeof v === 'object' && v !== null && !Array.isArray(v),
    'Invalid input: expected an object of contexts by name',
  ),
});

/**
 * Checks a parsed contexts file. Each context is checked on its own and the map rebuilt with own
 * properties, so a context named like `__proto__` is a context like any other (zod's records skip
 * that key).
 */
function checkFile(json: unknown): { file: ContextsFile } | { problem: string } {
  const shape = FileShape.safeParse(json);
  if (!shape.success) return { problem: describeIssues(shape.error.issues) };
  const issues: { path: PropertyKey[]; message: string }[] = [];
  const contexts: [string, Context][] = [];
  for (const [name, entry] of Object.entries(shape.data.contexts)) {
    const parsed = ContextEntry.safeParse(entry);
    if (parsed.success) {
      const { url, token, master } = parsed.data;
      contexts.push([name, { url: new URL(url).origin, master, ...(token !== undefined ? { token } : {}) }]);
    } else issues.push(...parsed.error.issues.map((i) => ({ ...i, path: ['contexts', name, ...i.path] })));
  }
  if (issues.length > 0) return { problem: describeIssues(issues) };
  return {
    file: {
      ...(shape.data.current !== undefined ? { current: shape.data.current } : {}),
      contexts: Object.fromEntries(contexts),
    },
  };
}

/**
 * The contexts file: JSON, mode 0600 in a 0700 directory (it holds tokens), written atomically
 * (temp file + rename) so a crash never leaves half a file. Reading checks every field (URL,
 * token, master flag): a file that does not hold is refused with what is wrong in it, never used
 * in part, and a token is never quoted.
 */
export class ContextStore {
  constructor(readonly path: string) {}

  async read(): Promise<ContextsFile> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { contexts: {} };
      throw new CliError(`orch: cannot read ${this.path}: ${(err as Error).message}`);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw this.invalid('not JSON');
    }
    const checked = checkFile(json);
    if ('problem' in checked) throw this.invalid(checked.problem);
    return checked.file;
  }

  async write(file: ContextsFile): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
    const tmp = `${this.path}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
    await chmod(tmp, 0o600);
    await rename(tmp, this.path);
  }

  /** The context to use: the current one, or a clear error saying how to make one. */
  async current(): Promise<{ name: string; context: Context }> {
    const file = await this.read();
    const name = file.current;
    const context =
      name !== undefined && Object.hasOwn(file.contexts, name) ? file.contexts[name] : undefined;
    if (name === undefined || !context) {
      throw new CliError('orch: no orchestrator context: run `orch connect <url> --token <token>` first');
    }
    return { name, context };
  }

  private invalid(problem: string): CliError {
    return new CliError(`orch: ${this.path} is not a valid contexts file (${problem}); fix or remove it`);
  }
}
