/**
 * Fan-out of /watch: many streams of one board under concurrent writers each get every change once,
 * in order; a stream joining while the others are live catches up without a gap; a client that
 * stops reading is cut off with `error {SlowConsumer}` after everything it was sent, while the
 * fast streams keep receiving, and it resumes losslessly from its last seq; floors still refuse a
 * state the node has not reached.
 */
import { connect, type Socket } from 'node:net';
import { describeStore, STORES } from '@support/pg/testing';
import { expect, it } from 'vitest';
import {
  boardTest,
  cli,
  events,
  type NodeProcess,
  nodeEnv,
  rpc,
  type SseItem,
  tag,
  value,
  watch,
} from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];
/** A small buffer limit, so that a stalled client is cut off after a few MB (kernel buffers included). */
const BUFFER_BYTES = 64 * 1024;

/** A raw `GET /watch` on a socket whose reading the test controls (pause = a client that stops reading). */
class RawWatcher {
  readonly socket: Socket;
  /** What arrived, in pieces: joined only when asked for (a stalled stream's backlog is megabytes). */
  #chunks: string[] = [];
  #waiters: (() => void)[] = [];

  constructor(url: string, board: string, after: number) {
    const { hostname, port } = new URL(url);
    this.socket = connect(Number(port), hostname);
    this.socket.setEncoding('utf8');
    this.socket.on('data', (d: string) => {
      this.#chunks.push(d);
      for (const w of this.#waiters.splice(0)) w();
    });
    this.socket.write(
      `GET /watch?after=${after} HTTP/1.1\r\nhost: ${hostname}\r\nx-data-board: ${board}\r\naccept: text/event-stream\r\n\r\n`,
    );
  }

  /** Everything received so far. */
  get text(): string {
    return this.#chunks.join('');
  }

  /** Waits until the received text satisfies `ok` (the socket is read meanwhile). */
  async until(ok: (text: string) => boolean): Promise<void> {
    this.socket.resume();
    while (!ok(this.text)) await new Promise<void>((r) => this.#waiters.push(r));
  }

  /**
   * Waits until `marker` has arrived (the socket is read meanwhile), looking at each piece of text
   * once (with the end of the one before it, for a marker cut in two).
   */
  async untilReceived(marker: string): Promise<void> {
    this.socket.resume();
    let carry = '';
    for (let seen = 0; ; ) {
      for (; seen < this.#chunks.length; seen++) {
        const piece = carry + this.#chunks[seen];
        if (piece.includes(marker)) return;
        carry = marker.length > 1 ? piece.slice(1 - marker.length) : '';
      }
      await new Promise<void>((r) => this.#waiters.push(r));
    }
  }

  /** The SSE items received so far (chunked transfer framing removed). */
  items(): SseItem[] {
    const text = this.text;
    const body = text.slice(text.indexOf('\r\n\r\n') + 4);
    // Chunk-size lines sit between the frames; every frame ends with a blank line.
    const unchunked = body.replace(/(^|\r\n)[0-9a-f]+\r\n/g, '');
    const out: SseItem[] = [];
    for (const block of unchunked.split('\n\n')) {
      const lines = block.split('\n').filter((l) => l !== '' && l !== '\r');
      if (lines.length === 0) continue;
      if (lines.every((l) => l.startsWith(':'))) {
        out.push({ comment: lines.map((l) => l.slice(1).trim()).join('\n') });
        continue;
      }
      const field = (name: string) => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
      const data = field('data');
      const id = field('id');
      out.push({
        event: field('event') ?? 'message',
        data: data === undefined ? null : JSON.parse(data),
        ...(id !== undefined ? { id } : {}),
      });
    }
    return out;
  }
}

const seqs = (items: SseItem[]) =>
  events(items)
    .filter((e) => e.event === 'change')
    .map((e) => (e.data as { seq: number }).seq);
/** Short, so that several heartbeat rounds fit in a test. */
const HEARTBEAT_MS = 400;
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

for (const storeName of STORES) {
  describeStore(storeName)(`watch fan-out on the ${storeName} store`, () => {
    let node: NodeProcess;
    const insert = (board: string, rows: Record<string, unknown>[]) =>
      rpc(node.url, 'mutate.insert', { rows }, { board });
    const head = async (board: string) =>
      value<{ watermark: number }>(
        await rpc(node.url, 'query.execute', { sql: 'SELECT 1', tables: T }, { board }),
      ).watermark;
    const slowConsumers = async () => {
      const text = await (await fetch(`${node.url}/metrics`)).text();
      return Number(/^board_node_watch_slow_consumers_total (\d+)/m.exec(text)?.[1]);
    };

    boardTest.beforeAll(async ({ openStore, tempDir, startNode }) => {
      const env = nodeEnv(await openStore(storeName), await tempDir('board-fan-'));
      for (const b of ['fan', 'slow', 'backlog']) {
        expect((await cli(['board', 'create', b, '--column', 'body:TEXT'], env)).code).toBe(0);
      }
      node = await startNode({
        ...env,
        BOARD_WATCH_BUFFER_BYTES: String(BUFFER_BYTES),
        BOARD_HEARTBEAT_MS: String(HEARTBEAT_MS),
      });
    });

    it('gives every stream every change once and in order, under concurrent writers and a late joiner', async () => {
      const start = await head('fan');
      const WRITERS = 4;
      const EACH = 15;
      const total = WRITERS * EACH;
      const done = (items: SseItem[]) => seqs(items).at(-1) === start + total;
      const early = Array.from({ length: 6 }, () =>
        watch(node.url, { board: 'fan', after: start, timeoutMs: 60_000, until: done }),
      );
      let late: ReturnType<typeof watch> | undefined;
      const writers = Array.from({ length: WRITERS }, async (_, w) => {
        for (let i = 0; i < EACH; i++) {
          value(await insert('fan', [{ id: `w${w}-${i}`, body: `writer ${w} #${i}` }]));
          // A stream that joins mid-way: it catches up from the store while the others are live.
          if (w === 0 && i === Math.floor(EACH / 2)) {
            late = watch(node.url, { board: 'fan', after: start, timeoutMs: 60_000, until: done });
          }
        }
      });
      await Promise.all(writers);
      expect(late).toBeDefined();
      for (const res of await Promise.all([...early, late as ReturnType<typeof watch>])) {
        expect(res.status).toBe(200);
        // Every record exactly once, seq order, no gap: a watermark never goes backwards.
        expect(seqs(res.items)).toEqual(range(start + 1, start + total));
        for (const e of events(res.items)) {
          expect(e).toMatchObject({ event: 'change', id: String((e.data as { seq: number }).seq) });
        }
      }
      // Read-your-watch: a query with the last pushed seq as its floor is served at or above it,
      // and a floor above the head is refused.
      const last = start + total;
      const at = await rpc(
        node.url,
        'query.execute',
        { sql: 'SELECT count(*) FROM {{t}}', tables: T, minWatermark: last },
        { board: 'fan' },
      );
      expect(value<{ watermark: number }>(at).watermark).toBeGreaterThanOrEqual(last);
      const above = await rpc(
        node.url,
        'query.execute',
        { sql: 'SELECT count(*) FROM {{t}}', tables: T, minWatermark: last + 1 },
        { board: 'fan' },
      );
      expect(tag(above)).toBe('WatermarkNotReached');
    });

    it('cuts off a client that stops reading with an error event, keeps the fast ones going, and resumes losslessly', async () => {
      const start = await head('slow');
      const cutBefore = await slowConsumers();
      const slow = new RawWatcher(node.url, 'slow', start);
      await slow.untilReceived('\r\n\r\n'); // the response head arrived
      slow.socket.pause(); // ... and then the client stops reading
      let fastSeen = 0;
      let target = Number.POSITIVE_INFINITY; // the last seq, once the writes are done
      const fast = Array.from({ length: 3 }, () =>
        watch(node.url, {
          board: 'slow',
          after: start,
          timeoutMs: 120_000,
          onItem: (item) => {
            if ('event' in item && item.event === 'change') fastSeen++;
          },
          until: (items) => (seqs(items).at(-1) ?? 0) >= target,
        }),
      );
      // 32 KiB rows until the node has cut the stalled stream off (a few MB sit in the kernel's
      // socket buffers first); bounded, so a node that never cuts it off fails the test.
      const body = 'x'.repeat(32 * 1024);
      let last = start;
      for (let i = 0; i < 1500 && (await slowConsumers()) === cutBefore; i++) {
        last = value<{ watermark: number }>(await insert('slow', [{ id: `s${i}`, body }])).watermark;
      }
      // Exactly one stream was cut off: the stalled one, not the three that kept reading.
      expect(await slowConsumers()).toBe(cutBefore + 1);
      // The fast streams kept receiving, and get the writes made after the cut too (one writer on
      // this board: the three watermarks follow `last`).
      target = last + 3;
      for (let i = 0; i < 3; i++) {
        last = value<{ watermark: number }>(
          await insert('slow', [{ id: `after-${i}`, body: 'small' }]),
        ).watermark;
      }
      expect(last).toBe(target);
      const fastRes = await Promise.all(fast);
      for (const res of fastRes) expect(seqs(res.items)).toEqual(range(start + 1, last));
      expect(fastSeen).toBe(3 * (last - start));
      expect(await slowConsumers()).toBe(cutBefore + 1);

      // The stalled client reads again: every change it was sent, in order, then the error event.
      await slow.untilReceived('event: error');
      const items = slow.items();
      const got = seqs(items);
      expect(got.length).toBeGreaterThan(0);
      expect(got).toEqual(range(start + 1, start + got.length));
      const cutAt = start + got.length;
      expect(cutAt).toBeLessThan(last);
      const error = events(items).at(-1);
      expect(error).toMatchObject({ event: 'error', data: { _tag: 'SlowConsumer' } });
      expect(error?.data).toMatchObject({ message: expect.stringContaining(`after=${cutAt}`) });
      slow.socket.destroy();

      // Resuming from the last seq received loses and repeats nothing.
      const resumed = await watch(node.url, {
        board: 'slow',
        after: cutAt,
        timeoutMs: 60_000,
        until: (its) => seqs(its).at(-1) === last,
      });
      expect(seqs(resumed.items)).toEqual(range(cutAt + 1, last));
    });
    it('gives every idle stream its heartbeats (spread over the interval) and changes still reach all', async () => {
      const at = await head('fan');
      const streams = Array.from({ length: 40 }, () => new RawWatcher(node.url, 'fan', at));
      try {
        const beats = (w: RawWatcher) => w.items().filter((i) => 'comment' in i).length;
        // Three heartbeat rounds for every stream, then one change for all of them.
        await Promise.all(streams.map((w) => w.until(() => beats(w) >= 3)));
        const { watermark } = value<{ watermark: number }>(await insert('fan', [{ id: 'hb-1', body: 'x' }]));
        await Promise.all(streams.map((w) => w.until(() => seqs(w.items()).includes(watermark))));
        for (const w of streams) expect(seqs(w.items())).toEqual([watermark]);
      } finally {
        for (const w of streams) w.socket.destroy();
      }
    });
    it('cuts off a client that stops reading during its catch-up, after every change it was sent', async () => {
      // A backlog of 22.5 MiB (3 mutations of 7.5 MiB): more than the kernel's socket buffers take.
      const cell = 'c'.repeat(64 * 1024);
      const start = await head('backlog');
      let last = start;
      for (let m = 0; m < 3; m++) {
        const rows = Array.from({ length: 120 }, (_, i) => ({ id: `c${m}-${i}`, body: cell }));
        last = value<{ watermark: number }>(await insert('backlog', rows)).watermark;
      }
      const cutBefore = await slowConsumers();
      const stalled = new RawWatcher(node.url, 'backlog', start);
      await stalled.untilReceived('\r\n\r\n');
      stalled.socket.pause(); // never reads during the catch-up
      // Cut off by the heartbeat that finds the catch-up still waiting for a drain (the test's own
      // timeout bounds this; without the cut it would wait forever, holding its page).
      while ((await slowConsumers()) === cutBefore) await new Promise((r) => setTimeout(r, 50));
      await stalled.untilReceived('event: error');
      const items = stalled.items();
      const got = seqs(items);
      expect(got).toEqual(range(start + 1, start + got.length));
      const cutAt = start + got.length;
      expect(cutAt).toBeLessThan(last);
      expect(events(items).at(-1)).toMatchObject({
        event: 'error',
        data: { _tag: 'SlowConsumer', message: expect.stringContaining(`after=${cutAt}`) },
      });
      stalled.socket.destroy();
      // Resuming from the last seq received loses and repeats nothing (a reader that pauses for a
      // whole heartbeat tick on a 7.5 MiB frame may be cut off again: it resumes as the client does).
      const resumed: number[] = [];
      while ((resumed.at(-1) ?? cutAt) < last) {
        const from = resumed.at(-1) ?? cutAt;
        const part = await watch(node.url, {
          board: 'backlog',
          after: from,
          timeoutMs: 60_000,
          until: (its) => seqs(its).at(-1) === last || events(its).some((e) => e.event === 'error'),
        });
        const got = seqs(part.items);
        const error = events(part.items).find((e) => e.event === 'error');
        if (error) expect(error.data).toMatchObject({ _tag: 'SlowConsumer' });
        else expect(got.length).toBeGreaterThan(0);
        resumed.push(...got);
      }
      expect(resumed).toEqual(range(cutAt + 1, last));
    });
  });
}
