import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { endStream } from '@support/server';
import type { SseFrame } from './sse-frames.js';

/** Where a watch stream writes its frames: bytes, never awaited (the feed must not wait on one stream). */
export interface WatchSink {
  /** Queues `frame`; never waits. */
  write(frame: SseFrame): void;
  /** Bytes queued and not yet taken by the kernel. */
  readonly buffered: number;
  /** Resolves once the queue drained, or the sink closed. */
  drained(): Promise<void>;
  /** Ends the stream after what is queued; destroys it if that is not read within `graceMs`. */
  end(graceMs: number): void;
  /** True once the connection closed (client gone, or destroyed). */
  readonly closed: boolean;
  /** Calls `listener` once when the connection closes. */
  onClose(listener: () => void): void;
}

/**
 * An SSE response written straight to Node's `ServerResponse`: frames are Buffers shared by all
 * streams that get them (no copy per stream), and `buffered` is Node's own count of what the
 * response and its socket hold unsent. On a chunked response (HTTP/1.1, the usual case) a frame's
 * pre-built chunk goes to the socket as it is, bypassing the response's per-write chunk framing;
 * `res.end()` still writes the last chunk after them. Otherwise (HTTP/1.0: a close-delimited body)
 * the SSE text goes through `res.write`.
 */
export class ResponseSink implements WatchSink {
  #closed = false;
  readonly #socket: Socket | undefined;

  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    res.flushHeaders();
    // `chunkedEncoding` is set by Node when the head is stored: the body is chunked.
    const chunked = (res as ServerResponse & { chunkedEncoding?: boolean }).chunkedEncoding === true;
    this.#socket = chunked && res.socket ? res.socket : undefined;
    res.once('close', () => {
      this.#closed = true;
    });
    // A client gone before the route ran: 'close' has fired already.
    if (res.destroyed || !res.socket || res.socket.destroyed) this.#closed = true;
  }

  write(frame: SseFrame): void {
    if (this.#closed || this.res.writableEnded) return;
    if (this.#socket) this.#socket.write(frame.chunk);
    else this.res.write(frame.text);
  }

  get buffered(): number {
    return this.res.writableLength;
  }

  get closed(): boolean {
    return this.#closed;
  }

  drained(): Promise<void> {
    if (this.#closed || this.res.writableLength === 0) return Promise.resolve();
    const emitter = this.#socket ?? this.res;
    return new Promise((resolve) => {
      const done = () => {
        emitter.off('drain', done);
        this.res.off('close', done);
        resolve();
      };
      emitter.once('drain', done);
      this.res.once('close', done);
    });
  }

  end(graceMs: number): void {
    if (this.#closed) return;
    // The connection ends with the stream; a client that stopped reading loses it after the grace.
    endStream(this.res, graceMs);
  }

  onClose(listener: () => void): void {
    if (this.#closed) listener();
    else this.res.once('close', listener);
  }
}
