import { createParser } from 'eventsource-parser';
import { apiErrorFromResponse, transportProblem } from '../api-client.js';
import { ContextStore } from '../context-store.js';
import { CliError } from '../errors.js';
import { contextsFile } from '../settings.js';

/**
 * `orch events`: prints each event as a JSON line `{id, type, data}` until interrupted. A dropped
 * connection is resumed after the last event printed (`Last-Event-ID`), so nothing is lost or
 * repeated; a refusal (bad credentials, a key revoked mid-stream) ends it with status 1.
 */
export async function followEvents(opts: { after?: string; type?: string }): Promise<number> {
  const { context } = await new ContextStore(contextsFile()).current();
  if (opts.after !== undefined && !/^\d{1,18}$/.test(opts.after))
    throw new CliError('orch: --after must be an event id (digits)');
  let last = opts.after;
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  let failures = 0;
  while (!stop.signal.aborted) {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (context.token) headers.authorization = `Bearer ${context.token}`;
    if (last !== undefined) headers['last-event-id'] = last;
    let res: Response;
    try {
      res = await fetch(`${context.url}/v1/events`, { headers, redirect: 'manual', signal: stop.signal });
    } catch (err) {
      if (stop.signal.aborted) break;
      if (++failures > 30) throw new CliError(`orch: cannot reach the orchestrator at ${context.url}`);
      process.stderr.write(`orch: event stream unreachable (${transportProblem(err)}); retrying\n`);
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    if (!res.ok || !res.body) {
      const e = apiErrorFromResponse(res.status, await res.text()).error!;
      throw new CliError(`orch: events: ${e.message} (${e.code})`);
    }
    failures = 0;
    let refused: string | undefined;
    const parser = createParser({
      onEvent: (m) => {
        if (m.event === 'error') {
          const body = JSON.parse(m.data) as { error?: { code?: string; message?: string } };
          refused = `${body.error?.message ?? 'refused'} (${body.error?.code ?? 'error'})`;
          return;
        }
        if (m.id) last = m.id;
        const type = m.event ?? 'message';
        if (opts.type && !type.startsWith(opts.type)) return;
        process.stdout.write(`${JSON.stringify({ id: Number(m.id), type, data: JSON.parse(m.data) })}\n`);
      },
    });
    const reader = res.body.getReader();
    const text = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(text.decode(value, { stream: true }));
      }
    } catch {
      // dropped (or interrupted): resume below unless stopping
    }
    if (refused) throw new CliError(`orch: events: ${refused}`);
  }
  return 0;
}
