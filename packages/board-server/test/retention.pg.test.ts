/**
 * Tail-only retention by count and by age, and what consumers see beyond it: changes.read and
 * /watch answer a resync, and a replica whose log no longer reaches back is rebuilt.
 */
import { describeStore, STORES, type TestStore } from '@support/pg/testing';
import { expect, it } from 'vitest';
import { boardTest, cli, events, type NodeProcess, nodeEnv, rpc, tag, value, watch } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];
type Page =
  | { resync: false; records: { seq: number }[]; cursor: number; more: boolean; head: number }
  | { resync: true; from: number; head: number };

async function until<T>(fn: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const storeName of STORES) {
  describeStore(storeName)(`retention on the ${storeName} store`, () => {
    let store: TestStore;
    let node: NodeProcess;
    let dataDir: string;
    const write = (board: string, id: string) =>
      rpc(node.url, 'mutate.insert', { rows: [{ id }] }, { board });
    const read = (board: string, after: number) => rpc(node.url, 'changes.read', { after }, { board });

    boardTest.beforeAll(async ({ openStore, tempDir, startNode }) => {
      store = await openStore(storeName);
      dataDir = await tempDir('board-ret-');
      const env = nodeEnv(store, dataDir);
      for (const b of ['bycount', 'byage']) expect((await cli(['board', 'create', b], env)).code).toBe(0);
      node = await startNode({
        ...env,
        BOARD_RETENTION_MAX_CHANGES: '3',
        BOARD_RETENTION_MAX_AGE_SEC: '2',
        BOARD_RETENTION_INTERVAL_MS: '50',
      });
    });

    it('keeps only the newest records (tail-only), answers resync beyond them, and rebuilds a replica left behind', async () => {
      value(await write('bycount', 'r0'));
      const first = value<{ cache: string; watermark: number }>(
        await rpc(
          node.url,
          'query.execute',
          { sql: 'SELECT count(*) FROM {{t}}', tables: T },
          { board: 'bycount' },
        ),
      );
      expect(first.watermark).toBe(1);
      for (let i = 1; i <= 10; i++) value(await write('bycount', `r${i}`));
      const resync = await until(async () => {
        const p = value<Page>(await read('bycount', 0));
        return p.resync ? p : undefined;
      });
      expect(resync).toEqual({ resync: true, from: 11, head: 11 });
      await until(async () => (value<Page>(await read('bycount', 7)).resync ? true : undefined));
      const tail = value<Page>(await read('bycount', 8));
      expect(tail.resync === false && tail.records.map((r) => r.seq)).toEqual([9, 10, 11]);
      const rebuilt = value<{
        cache: string;
        sync: { mode: string };
        result: { rows: unknown[][] };
        watermark: number;
      }>(
        await rpc(
          node.url,
          'query.execute',
          { sql: 'SELECT count(*) FROM {{t}}', tables: T },
          { board: 'bycount' },
        ),
      );
      expect(rebuilt.cache).toBe('rebuild');
      expect(rebuilt.sync.mode).toBe('rebuild');
      expect(rebuilt.result.rows).toEqual([[11]]);
      expect(rebuilt.watermark).toBe(11);
    });

    it('sends resync on /watch for a cursor beyond retention, then continues with changes', async () => {
      let wrote = false;
      const res = await watch(node.url, {
        board: 'bycount',
        after: 2,
        onItem: (item) => {
          if ('event' in item && item.event === 'resync' && !wrote) {
            wrote = true;
            void write('bycount', 'after-resync');
          }
        },
        until: (items) => events(items).some((e) => e.event === 'change'),
      });
      const ev = events(res.items);
      expect(ev[0]).toEqual({ event: 'resync', data: { from: 11 } });
      expect(ev[1]).toMatchObject({ event: 'change', data: { seq: 12 } });
    });

    it('trims records older than the age bound', async () => {
      const w = value<{ watermark: number }>(await write('byage', 'a1')).watermark;
      expect(value<Page>(await read('byage', 0)).resync).toBe(false);
      const trimmed = await until(async () => {
        const p = value<Page>(await read('byage', 0));
        return p.resync ? p : undefined;
      });
      expect(trimmed).toEqual({ resync: true, from: w, head: w });
      expect(tag(await read('byage', w))).toBe('ok');
    });
  });
}
