/**
 * SSE frames as bytes, encoded once and written as they are to every stream that gets them.
 * Data is always one JSON text, which has no line breaks (JSON.stringify escapes them), so each
 * frame is one `data:` line; the field order is the one Hono's `writeSSE` used before
 * (`event`, `data`, `id`).
 *
 * A frame is kept twice: as the SSE text, and already framed as one HTTP/1.1 chunk
 * (`<size hex>\r\n<text>\r\n`), so that on a chunked response the same bytes go to every socket
 * with no per-stream work at all.
 */
export interface SseFrame {
  /** The SSE text. */
  readonly text: Buffer;
  /** The text as one HTTP/1.1 chunk of a `transfer-encoding: chunked` body. */
  readonly chunk: Buffer;
}

function frame(text: string): SseFrame {
  const bytes = Buffer.from(text);
  const chunk = Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, CRLF]);
  return { text: bytes, chunk };
}

const CRLF = Buffer.from('\r\n');

/** The `: hb` heartbeat comment. */
export const HEARTBEAT_FRAME: SseFrame = frame(': hb\n\n');

/** One event: `event: <name>\ndata: <json>\n[id: <id>\n]\n`. */
export function sseFrame(event: 'change' | 'resync' | 'error', data: unknown, id?: number): SseFrame {
  const idLine = id === undefined ? '' : `\nid: ${id}`;
  return frame(`event: ${event}\ndata: ${JSON.stringify(data)}${idLine}\n\n`);
}
