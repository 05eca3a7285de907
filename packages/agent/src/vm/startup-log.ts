import { createReadStream, createWriteStream } from 'node:fs';
import { type FileHandle, open, rename, rm, stat, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { LOG_WINDOW_BYTES, type LogWindowQuery, logWindow } from '@orch/protocol';
import { connectUnix } from './line-socket.js';

/** The current segment, the previous one, and how many bytes came before the previous one. */
const CURRENT = 'startup.log';
const PREVIOUS = 'startup.log.1';
const BASE = 'startup.log.base';

/**
 * A VM's startup log on the host, bounded: QEMU serves the guest's `log0` port on a Unix socket
 * (`log.sock`), which the agent reads into `startup.log`; when that reaches half of `maxBytes` it
 * becomes `startup.log.1` (the older one is dropped) and `startup.log.base` counts the bytes
 * dropped so far. So at most `maxBytes` stay on disk whatever the guest writes, and offsets stay
 * absolute (bytes since the VM first started): a window asked before what is kept starts at the
 * oldest byte kept (as with services' logs).
 *
 * Backpressure: the socket is paused while a chunk is written, so when the disk is slower than the
 * guest, QEMU's chardev sees a full socket and throttles the guest's port (its writes block); when
 * no agent reads at all (the agent is down), the guest's writes block until one connects again.
 * Neither the agent's memory nor the disk grows with the guest's output.
 *
 * Appends, rotations and reads of one VM are serialized on one queue.
 */
export class StartupLog {
  private queue: Promise<unknown> = Promise.resolve();
  private socket: Socket | undefined;
  private current: FileHandle | undefined;
  private sizes: { base: number; previous: number; current: number } | undefined;

  constructor(
    private readonly dir: string,
    /** The most bytes kept on disk (both segments together). */
    readonly maxBytes: number,
  ) {}

  private get half(): number {
    return Math.max(1, Math.floor(this.maxBytes / 2));
  }

  /**
   * Connects to QEMU's log socket (retrying until `deadline`) and appends what the guest writes
   * until QEMU closes it or {@link detach} is called.
   */
  async attach(socketPath: string, deadline: number): Promise<void> {
    this.detach();
    const socket = await connectUnix(socketPath, deadline);
    this.socket = socket;
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      socket.pause();
      this.serial(() => this.append(chunk)).then(
        () => socket.resume(),
        () => socket.destroy(),
      );
    });
    socket.once('close', () => {
      if (this.socket === socket) this.socket = undefined;
      void this.serial(() => this.closeFile());
    });
  }

  /** Stops reading (the guest's writes then block in QEMU until someone reads again). */
  detach(): void {
    this.socket?.destroy();
    this.socket = undefined;
  }

  /** The window of `query` of the log kept, with the log's absolute offset and whole length. */
  read(query: LogWindowQuery): Promise<{ bytes: Buffer; offset: number; size: number }> {
    return this.serial(async () => {
      const s = await this.load();
      const size = s.base + s.previous + s.current;
      let { start, length } = logWindow(size, query);
      if (start < s.base) {
        start = s.base;
        length = Math.min(LOG_WINDOW_BYTES, size - start);
      }
      const bytes = Buffer.alloc(length);
      let filled = 0;
      // [base, base+previous) is in the previous segment, the rest in the current one.
      for (const [name, from, len] of [
        [PREVIOUS, s.base, s.previous],
        [CURRENT, s.base + s.previous, s.current],
      ] as const) {
        const lo = Math.max(start + filled, from);
        const hi = Math.min(start + length, from + len);
        if (hi <= lo) continue;
        filled += await readAt(join(this.dir, name), bytes, lo - start, hi - lo, lo - from);
      }
      return { bytes: bytes.subarray(0, filled), offset: start, size };
    });
  }

  /** Writes the bytes kept (previous then current segment) to `file` (a live snapshot's log). */
  copyTo(file: string): Promise<void> {
    return this.serial(async () => {
      await this.current?.sync();
      const out = createWriteStream(file, { mode: 0o600 });
      for (const name of [PREVIOUS, CURRENT]) {
        const path = join(this.dir, name);
        if (!(await stat(path).catch(() => undefined))) continue;
        await pipeline(createReadStream(path), out, { end: false });
      }
      out.end();
      await new Promise<void>((resolve, reject) => out.once('finish', resolve).once('error', reject));
    });
  }

  /**
   * Starts this VM's log from a snapshot's (a live restore continues it): at most the last half of
   * {@link maxBytes} of `file`, offsets from 0.
   */
  seed(file: string): Promise<void> {
    return this.serial(async () => {
      const size = (await stat(file).catch(() => undefined))?.size ?? 0;
      await rm(join(this.dir, PREVIOUS), { force: true });
      await rm(join(this.dir, BASE), { force: true });
      const keep = Math.min(size, this.half);
      const src = await open(file, 'r');
      try {
        await pipeline(
          createReadStream('', { fd: src, start: size - keep, autoClose: false }),
          createWriteStream(join(this.dir, CURRENT), { mode: 0o600 }),
        );
      } finally {
        await src.close();
      }
      this.sizes = { base: size - keep, previous: 0, current: keep };
      await this.writeBase(size - keep);
    });
  }

  private serial<T>(task: () => Promise<T>): Promise<T> {
    const next = this.queue.then(task);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async load(): Promise<{ base: number; previous: number; current: number }> {
    if (this.sizes) return this.sizes;
    const size = async (name: string) => (await stat(join(this.dir, name)).catch(() => undefined))?.size ?? 0;
    const baseText = await open(join(this.dir, BASE), 'r')
      .then(async (f) => {
        try {
          return (await f.readFile('utf8')).trim();
        } finally {
          await f.close();
        }
      })
      .catch(() => '0');
    this.sizes = {
      base: /^\d{1,15}$/.test(baseText) ? Number(baseText) : 0,
      previous: await size(PREVIOUS),
      current: await size(CURRENT),
    };
    return this.sizes;
  }

  private async append(chunk: Buffer): Promise<void> {
    const s = await this.load();
    let at = 0;
    while (at < chunk.length) {
      if (s.current >= this.half) await this.rotate(s);
      this.current ??= await open(join(this.dir, CURRENT), 'a', 0o600);
      const n = Math.min(chunk.length - at, this.half - s.current);
      await this.current.write(chunk, at, n);
      s.current += n;
      at += n;
    }
  }

  /** current -> previous (the older previous dropped, counted in base); a new empty current. */
  private async rotate(s: { base: number; previous: number; current: number }): Promise<void> {
    await this.closeFile();
    await this.writeBase(s.base + s.previous);
    await rename(join(this.dir, CURRENT), join(this.dir, PREVIOUS));
    s.base += s.previous;
    s.previous = s.current;
    s.current = 0;
  }

  private async writeBase(base: number): Promise<void> {
    const tmp = join(this.dir, `${BASE}.tmp`);
    await writeFile(tmp, `${base}\n`, { mode: 0o600 });
    await rename(tmp, join(this.dir, BASE));
  }

  private async closeFile(): Promise<void> {
    const f = this.current;
    this.current = undefined;
    await f?.close();
  }
}

async function readAt(
  path: string,
  into: Buffer,
  at: number,
  length: number,
  position: number,
): Promise<number> {
  const f = await open(path, 'r').catch(() => undefined);
  if (!f) return 0;
  try {
    return (await f.read(into, at, length, position)).bytesRead;
  } finally {
    await f.close();
  }
}
