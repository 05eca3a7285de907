/**
 * Replicas under a memory budget: the least recently used is closed when open replicas hold more
 * memory than BOARD_REPLICA_MEMORY_MB, and re-attached from its file on demand, also after a
 * node restart; and the DuckDB threads each replica gets.
 */
import { describeStore, STORES, type TestStore } from '@support/pg/testing';
import { afterAll, expect, it } from 'vitest';
import { boardTest, cli, type NodeProcess, nodeEnv, rpc, startNode, value } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];
type Outcome = { cache: string; sync: { mode: string }; result: { rows: unknown[][] }; watermark: number };
type Stats = {
  replicas: {
    open: number;
    evicted: number;
    memoryInUseBytes: number;
    replicas: { board: string; memoryBytes: number; threads: number }[];
  };
};

for (const storeName of STORES) {
  describeStore(storeName)(`replica memory budget on the ${storeName} store`, () => {
    let store: TestStore;
    let node: NodeProcess;
    let dir: string;
    let env: Record<string, string>;
    // The node this file starts itself (the fixture stops the one it started).
    let restarted: NodeProcess | undefined;
    afterAll(() => restarted?.stop());
    const count = (board: string) =>
      rpc(node.url, 'query.execute', { sql: 'SELECT count(*), sum(n) FROM {{t}}', tables: T }, { board });

    boardTest.beforeAll(async ({ openStore, tempDir, startNode }) => {
      store = await openStore(storeName);
      dir = await tempDir('board-mem-');
      env = {
        ...nodeEnv(store, dir),
        BOARD_REPLICA_MAX_OPEN: '16',
        BOARD_REPLICA_MEMORY_MB: '1',
      };
      for (const b of ['m1', 'm2']) {
        expect(
          (await cli(['board', 'create', b, '--column', 'n:INTEGER', '--column', 'title:TEXT'], env)).code,
        ).toBe(0);
      }
      node = await startNode(env);
      for (const b of ['m1', 'm2']) {
        for (let k = 0; k < 2; k++) {
          const rows = Array.from({ length: 10_000 }, (_, i) => ({
            id: `${b}-${k}-${i}`,
            n: i,
            title: `row ${i} of ${b}`,
          }));
          value(await rpc(node.url, 'mutate.insert', { rows }, { board: b }));
        }
      }
    });

    it('closes the least recently used replica beyond the memory budget and re-attaches it', async () => {
      value(await count('m1'));
      const s1 = value<Stats>(await rpc(node.url, 'node.stats', {}, { board: 'm1' }));
      expect(s1.replicas.replicas[0]?.memoryBytes).toBeGreaterThan(512 * 1024);
      value(await count('m2'));
      const s2 = value<Stats>(await rpc(node.url, 'node.stats', {}, { board: 'm1' }));
      expect(s2.replicas.replicas.map((r) => r.board)).toEqual(['m2']);
      expect(s2.replicas.evicted).toBeGreaterThanOrEqual(1);
      const back = value<Outcome>(await count('m1'));
      expect(back.cache).toBe('reattach');
      expect(back.result.rows).toEqual([[20_000, 2 * ((9_999 * 10_000) / 2)]]);
    });

    it('re-attaches replica files after a restart and catches up incrementally', async () => {
      await node.stop();
      node = await startNode(env);
      restarted = node;
      value(await rpc(node.url, 'mutate.insert', { rows: [{ id: 'late', n: 1 }] }, { board: 'm2' }));
      const out = value<Outcome>(await count('m2'));
      expect(out.cache).toBe('reattach');
      expect(out.sync.mode).toBe('incremental');
      expect(out.result.rows).toEqual([[20_001, 2 * ((9_999 * 10_000) / 2) + 1]]);
    });

    it('opens each replica with BOARD_REPLICA_THREADS DuckDB threads (1 unless set)', async () => {
      // As the replica's DuckDB reports them (a query may not read settings itself).
      const threads = async () => {
        value(await count('m2'));
        const s = value<Stats>(await rpc(node.url, 'node.stats', {}, { board: 'm2' }));
        return s.replicas.replicas.map((r) => [r.board, r.threads]);
      };
      expect(await threads()).toEqual([['m2', 1]]);
      await node.stop();
      node = await startNode({ ...env, BOARD_REPLICA_THREADS: '2' });
      restarted = node;
      expect(await threads()).toEqual([['m2', 2]]);
    });
  });
}
