import { ApiKeyList, HostList } from '@orch/protocol';
import { OrchClient } from '../api-client.js';
import { type Context, ContextStore, tokenProblem } from '../context-store.js';
import { UsageError } from '../errors.js';
import { contextsFile } from '../settings.js';
import { table } from '../table.js';
import type { OutputMode } from './preview.js';

/**
 * `orch connect <url> --token <t> [--master] [--name ctx]`: checks that the orchestrator accepts
 * the token (and, with --master, that it is the master token), then saves the context and makes
 * it current.
 */
export async function connect(
  rawUrl: string,
  opts: { token?: string; master?: boolean; name?: string },
  output: OutputMode,
): Promise<string> {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new UsageError(`${JSON.stringify(rawUrl)} is not a URL (for example http://127.0.0.1:8080)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UsageError('the orchestrator URL must be http or https');
  if (url.username || url.password || url.search || url.hash)
    throw new UsageError('the orchestrator URL must not carry credentials, a query or a fragment');
  // Checked before anything is sent, and never quoted: a token fetch cannot send would otherwise
  // come back inside its error message.
  const problem = opts.token ? tokenProblem(opts.token) : undefined;
  if (problem) throw new UsageError(`--token ${problem}; it was not sent or saved`);
  const context: Context = {
    url: url.origin,
    master: opts.master ?? false,
    ...(opts.token ? { token: opts.token } : {}),
  };
  const client = new OrchClient(context);
  await client.call(HostList, 'GET', '/v1/hosts');
  // A master-only read proves the token is the master token (501 without a key store still says "admitted").
  if (context.master) {
    await client.call(ApiKeyList, 'GET', '/v1/api-keys').catch((err: { status?: number }) => {
      if (err.status === 403)
        throw new UsageError(
          '--master was given, but the orchestrator refuses this token on master-only routes',
        );
      if (err.status !== 501) throw err;
    });
  }
  const name = opts.name ?? url.host;
  const store = new ContextStore(contextsFile());
  const file = await store.read();
  // An own property even for a name like `__proto__` (a context name is the user's).
  file.contexts = Object.fromEntries([...Object.entries(file.contexts), [name, context]]);
  file.current = name;
  await store.write(file);
  if (output === 'json') return `${JSON.stringify({ name, url: context.url, master: context.master })}\n`;
  return `connected to ${context.url} as context "${name}"${context.master ? ' (master token)' : ''}\n`;
}

/** `orch context list`. Tokens are never printed. */
export async function listContexts(output: OutputMode): Promise<string> {
  const file = await new ContextStore(contextsFile()).read();
  const entries = Object.entries(file.contexts).map(([name, c]) => ({
    name,
    url: c.url,
    master: c.master,
    current: name === file.current,
  }));
  if (output === 'json') return `${JSON.stringify({ contexts: entries }, null, 2)}\n`;
  if (entries.length === 0) return 'no contexts yet: run `orch connect <url> --token <token>`\n';
  return table(
    ['CURRENT', 'NAME', 'URL', 'MASTER'],
    entries.map((e) => [e.current ? '*' : '', e.name, e.url, e.master ? 'yes' : 'no']),
  );
}

/** `orch context use <name>`. */
export async function useContext(name: string): Promise<string> {
  const store = new ContextStore(contextsFile());
  const file = await store.read();
  if (!Object.hasOwn(file.contexts, name)) {
    const known = Object.keys(file.contexts);
    throw new UsageError(
      `no context named ${JSON.stringify(name)}${known.length ? `; known: ${known.join(', ')}` : ''}`,
    );
  }
  file.current = name;
  await store.write(file);
  return `using context "${name}"\n`;
}
