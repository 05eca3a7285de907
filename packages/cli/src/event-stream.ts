import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { ApiCallError } from './api-client.js';

/**
 * The longest line of `GET /v1/events` the CLI holds: 1 MiB, orchd's own limit on a request
 * body. An event's data is one record's non-secret fields, a few KiB; a line is only longer when
 * what answers is not orchd (or is broken), and without a limit the parser would buffer a line
 * that never ends until the process runs out of memory.
 */
export const EVENT_LINE_LIMIT_BYTES = 2 ** 20;

const LF = 0x0a;
const CR = 0x0d;

/**
 * Reads a Server-Sent Events body to its end, handing each event to `onEvent` (in order; an
 * exception it throws ends the read). A line longer than `lineLimit` bytes (without its line
 * break) cancels the body and throws a `transport` {@link ApiCallError}, checked before the bytes
 * reach the parser. Any other failure to read (a dropped connection, an abort) is thrown as it is.
 *
 * @example
 * const res = await api.open('/v1/events', signal, { accept: 'text/event-stream' });
 * await readEventStream(res.body!, (m) => console.log(m.event, m.data));
 */
export async function readEventStream(
  body: ReadableStream<Uint8Array>,
  onEvent: (message: EventSourceMessage) => void,
  lineLimit = EVENT_LINE_LIMIT_BYTES,
): Promise<void> {
  let failure: unknown;
  const parser = createParser({
    onEvent: (m) => {
      if (failure !== undefined) return;
      try {
        onEvent(m);
      } catch (err) {
        failure = err;
      }
    },
  });
  const text = new TextDecoder();
  const reader = body.getReader();
  // Bytes of the line in progress: since the last line break (CR, LF or CRLF end an SSE line).
  let line = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    for (const byte of value) {
      line = byte === LF || byte === CR ? 0 : line + 1;
      if (line > lineLimit) {
        await reader.cancel().catch(() => undefined);
        throw new ApiCallError(
          undefined,
          `the orchestrator's event stream sent a line longer than ${describeBytes(lineLimit)} without a line break; stopped reading it`,
          'transport',
        );
      }
    }
    parser.feed(text.decode(value, { stream: true }));
    if (failure !== undefined) {
      await reader.cancel().catch(() => undefined);
      throw failure;
    }
  }
}

const describeBytes = (n: number) => (n % 2 ** 20 === 0 ? `${n / 2 ** 20} MiB` : `${n} bytes`);
