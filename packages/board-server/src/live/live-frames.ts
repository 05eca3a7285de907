import type { SseFrame } from '../watch/sse-frames.js';

const CRLF = Buffer.from('\r\n');

/**
 * One live-stream event as an SSE frame (the shape `/watch` writes: the text, and the same text
 * as one HTTP/1.1 chunk), from its data already encoded as JSON. Built once per evaluation and
 * written as it is to every stream that gets it.
 */
export function liveFrame(event: 'result' | 'diff' | 'error', json: string, id?: number): SseFrame {
  const idLine = id === undefined ? '' : `\nid: ${id}`;
  const text = Buffer.from(`event: ${event}\ndata: ${json}${idLine}\n\n`);
  const chunk = Buffer.concat([Buffer.from(`${text.length.toString(16)}\r\n`), text, CRLF]);
  return { text, chunk };
}
