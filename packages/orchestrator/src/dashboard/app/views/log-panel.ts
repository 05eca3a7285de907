// Following an environment's log in the page: GET /v1/environments/{id}/logs?follow=true.
import { errorFromBody, LOG_OFFSET_HEADER } from '@orch/protocol';

/** How much of a log the page keeps (older text is dropped from the top). */
const KEEP_CHARS = 256 * 1024;
/** Where a page starts reading a log: its last bytes, not a whole long history. */
const TAIL_BYTES = 64 * 1024;

/**
 * Streams environment `envId`'s startup log (or service `service`'s) into `out` until the
 * environment stops; a dropped connection resumes from the byte reached. Returns the function
 * that ends it.
 */
export function followLog(envId: string, service: string | undefined, out: HTMLElement): () => void {
  const stop = new AbortController();
  const base = `/v1/environments/${encodeURIComponent(envId)}/logs?follow=true${
    service ? `&service=${encodeURIComponent(service)}` : ''
  }`;
  const append = (text: string) => {
    const atBottom = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
    out.textContent = `${out.textContent ?? ''}${text}`.slice(-KEEP_CHARS);
    if (atBottom) out.scrollTop = out.scrollHeight;
  };
  void (async () => {
    let window = `tail=${TAIL_BYTES}`;
    while (!stop.signal.aborted) {
      let offset = 0;
      try {
        const res = await fetch(`${base}&${window}`, { credentials: 'same-origin', signal: stop.signal });
        if (!res.ok) {
          const text = await res.text();
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined;
          }
          append(`[${errorFromBody(res.status, body).message}]\n`);
          return;
        }
        offset = Number(res.headers.get(LOG_OFFSET_HEADER) ?? 0);
        const reader = res.body!.getReader();
        const text = new TextDecoder();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          offset += value.byteLength;
          append(text.decode(value, { stream: true }));
        }
        append('[end of log: the environment stopped]\n');
        return;
      } catch {
        if (stop.signal.aborted) return;
        // dropped: go on from the byte reached after a pause
        window = `offset=${offset}`;
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  })();
  return () => stop.abort();
}
