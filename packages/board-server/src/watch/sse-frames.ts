/**
 * SSE frames as bytes, encoded once and written as they are to every stream that gets them.
 * Data is always one JSON text, which has no line breaks (JSON.stringify escapes them), so each
 * frame is one `data:` line; the field order is the one Hono's `writeSSE` used before
 * (`event`, `data`, `id`).
 */

/** The `: hb` heartbeat comment. */
export const HEARTBEAT_FRAME: Buffer = Buffer.from(': hb\n\n');

/** One event: `event: <name>\ndata: <json>\n[id: <id>\n]\n`. */
export function sseFrame(event: 'change' | 'resync' | 'error', data: unknown, id?: number): Buffer {
  const idLine = id === undefined ? '' : `\nid: ${id}`;
  return Buffer.from(`event: ${event}\ndata: ${JSON.stringify(data)}${idLine}\n\n`);
}
