import { ApiCallError } from '../api-client.js';
import { CliError } from '../errors.js';
import { readEventStream } from '../event-stream.js';
import { client } from './client.js';

/** How often a follower that cannot reach the orchestrator tries again before giving up. */
const MAX_RECONNECTS = 30;

/**
 * `orch events`: prints each event as a JSON line `{id, type, data}` until interrupted. A dropped
 * connection is resumed after the last event printed (`Last-Event-ID`), so nothing is lost or
 * repeated; a refusal (bad credentials, a key revoked mid-stream) ends it with status 1, and so
 * does a stream the CLI cannot use (a line past the line limit, event data that is not JSON).
 * Error answers are read with the API client's answer limit.
 */
export async function followEvents(opts: { after?: string; type?: string }): Promise<number> {
  const api = await client();
  if (opts.after !== undefined && !/^\d{1,18}$/.test(opts.after))
    throw new CliError('orch: --after must be an event id (digits)');
  let last = opts.after;
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  let failures = 0;
  while (!stop.signal.aborted) {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (last !== undefined) headers['last-event-id'] = last;
    let res: Response;
    try {
      res = await api.open('/v1/events', stop.signal, headers);
    } catch (err) {
      if (stop.signal.aborted) break;
      // An error answer (or an unusable one) ends it; only an unreachable orchestrator is retried.
      if (!(err instanceof ApiCallError && err.code === 'transport' && err.error === undefined)) throw err;
      if (++failures > MAX_RECONNECTS) throw err;
      process.stderr.write(`${err.message}; retrying in 1 s\n`);
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    failures = 0;
    if (!res.body)
      throw new ApiCallError(
        undefined,
        'the orchestrator answered GET /v1/events with no stream',
        'bad_answer',
      );
    let refused: string | undefined;
    try {
      await readEventStream(res.body, (m) => {
        if (m.event === 'error') {
          const body = parseData(m.data) as { error?: { code?: string; message?: string } } | undefined;
          refused = `${body?.error?.message ?? 'refused'} (${body?.error?.code ?? 'error'})`;
          return;
        }
        const data = parseData(m.data);
        if (data === undefined)
          throw new ApiCallError(
            undefined,
            `malformed event from the orchestrator: the data of event ${m.id ?? '(no id)'} is not JSON`,
            'bad_answer',
          );
        if (m.id) last = m.id;
        const type = m.event ?? 'message';
        if (opts.type && !type.startsWith(opts.type)) return;
        process.stdout.write(`${JSON.stringify({ id: Number(m.id), type, data })}\n`);
      });
    } catch (err) {
      // A stream the CLI cannot use ends it; a dropped (or interrupted) one resumes below.
      if (err instanceof ApiCallError) throw err;
    }
    if (refused) throw new CliError(`orch: events: ${refused}`);
  }
  return 0;
}

/** `data` as JSON, or undefined when it is not JSON. */
function parseData(data: string): unknown {
  try {
    return JSON.parse(data) as unknown;
  } catch {
    return undefined;
  }
}
