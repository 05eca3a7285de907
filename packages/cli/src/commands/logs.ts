import { LOG_OFFSET_HEADER, LOG_SIZE_HEADER } from '@orch/protocol';
import { ApiCallError } from '../api-client.js';
import { CliError } from '../errors.js';
import { ENVIRONMENT_ID, idSegment } from '../ids.js';
import { client } from './client.js';

/** How often a follower whose connection dropped tries again before giving up. */
const MAX_RECONNECTS = 30;

/**
 * `orch logs <env> [service] [-f]`: prints the environment's startup log, or that service's log, as
 * the guest wrote it (raw bytes).
 * Without `-f` it reads the whole log window by window; with `-f` it keeps printing new output
 * until the environment stops (or Ctrl-C), reconnecting after a dropped connection from the
 * byte it had reached, so nothing is printed twice or skipped.
 */
export async function showLogs(
  id: string,
  opts: { follow?: boolean; tail?: string; service?: string },
): Promise<number> {
  const segment = idSegment(ENVIRONMENT_ID, id);
  if (opts.tail !== undefined && !/^\d{1,15}$/.test(opts.tail))
    throw new CliError('orch: --tail must be a number of bytes');
  const api = await client();
  // With a service: its log (the orchestrator checks the name); its offsets are absolute and skip
  // what the guest's rotation dropped, which the headers' offsets say.
  const service = opts.service !== undefined ? `service=${encodeURIComponent(opts.service)}&` : '';
  const base = `/v1/environments/${segment}/logs`;
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  if (!opts.follow) {
    let query = opts.tail !== undefined ? `tail=${opts.tail}` : 'offset=0';
    for (;;) {
      const res = await api.open(`${base}?${service}${query}`, stop.signal);
      const bytes = await api.readAll(res);
      await write(bytes);
      const next = Number(res.headers.get(LOG_OFFSET_HEADER)) + bytes.byteLength;
      if (bytes.byteLength === 0 || next >= Number(res.headers.get(LOG_SIZE_HEADER))) return 0;
      query = `offset=${next}`;
    }
  }
  let query = opts.tail !== undefined ? `tail=${opts.tail}` : 'offset=0';
  let failures = 0;
  while (!stop.signal.aborted) {
    let res: Response;
    try {
      res = await api.open(`${base}?${service}${query}&follow=true`, stop.signal);
    } catch (err) {
      if (stop.signal.aborted) break;
      if (!(err instanceof ApiCallError && err.code === 'transport') || ++failures > MAX_RECONNECTS)
        throw err;
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    failures = 0;
    let offset = Number(res.headers.get(LOG_OFFSET_HEADER) ?? 0);
    try {
      const reader = res.body?.getReader();
      for (;;) {
        const next = await reader?.read();
        if (!next || next.done) break;
        await write(next.value);
        offset += next.value.byteLength;
      }
      return 0; // the environment stopped: its whole log was printed
    } catch {
      // dropped (or interrupted): go on from the byte reached, unless stopping
      query = `offset=${offset}`;
    }
  }
  return 0;
}

function write(bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) =>
    process.stdout.write(bytes, (err) => (err ? reject(err) : resolve())),
  );
}
