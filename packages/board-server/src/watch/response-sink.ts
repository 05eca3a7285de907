import type { ServerResponse } from 'node:http';

/** Where a watch stream writes its frames: bytes, never awaited (the feed must not wait on one stream). */
export interface WatchSink {
  /** Queues `frame`; never waits. */
  write(frame: Buffer): void;
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
 * response and its socket hold unsent.
 */
export class ResponseSink implements WatchSink {
  #closed = false;

  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    res.flushHeaders();
    res.once('close', () => {
      this.#closed = true;
    });
  }

  write(frame: Buffer): void {
    if (!this.#closed && !this.res.writableEnded) this.res.write(frame);
  }

  get buffered(): number {
    return this.res.writableLength;
  }

  get closed(): boolean {
    return this.#closed;
  }

  drained(): Promise<void> {
    if (this.#closed || this.res.writableLength === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.res.off('drain', done);
        this.res.off('close', done);
        resolve();
      };
      this.res.once('drain', done);
      this.res.once('close', done);
    });
  }

  end(graceMs: number): void {
    if (this.#closed) return;
    if (!this.res.writableEnded) this.res.end();
    if (this.res.writableLength === 0) return;
    // A client that stopped reading would keep the socket (and what is queued for it) forever.
    const timer = setTimeout(() => this.res.destroy(), graceMs);
    timer.unref();
    this.res.once('close', () => clearTimeout(timer));
  }

  onClose(listener: () => void): void {
    if (this.#closed) listener();
    else this.res.once('close', listener);
  }
}
