/**
 * A node killed with SIGKILL in the middle of keyed writes loses no acknowledged write, and
 * retrying every write after a restart applies nothing twice. Looped over both stores; on the
 * embedded store the restarted node adopts the PostgreSQL the killed one left running.
 */
import { describeStore, STORES, type TestStore } from '@support/pg/testing';
import { afterAll, expect, it } from 'vitest';
import { boardTest, cli, type NodeProcess, nodeEnv, rpc, startNode, value } from './fixtures.js';

for (const storeName of STORES) {
  describeStore(storeName)(`SIGKILL during keyed writes on the ${storeName} store`, () => {
    let store: TestStore;
    let dir: string;
    let env: Record<string, string>;
    const nodes: NodeProcess[] = [];

    boardTest.beforeAll(async ({ openStore, tempDir }) => {
      store = await openStore(storeName);
      dir = await tempDir('board-kill-');
      env = nodeEnv(store, dir);
      expect((await cli(['board', 'create', 'ledger', '--column', 'amount:INTEGER'], env)).code).toBe(0);
    });

    afterAll(async () => {
      for (const n of nodes) await n.kill();
    });

    it('keeps every acknowledged write and applies each retried key once', async () => {
      const first = await startNode(env);
      nodes.push(first);
      const acked = new Map<string, number>();
      const attempted = new Set<string>();
      let killed = false;
      const workers = Array.from({ length: 6 }, async (_, w) => {
        for (let i = 0; !killed; i++) {
          const key = `k-${w}-${i}`;
          attempted.add(key);
          try {
            const a = await rpc(
              first.url,
              'mutate.insert',
              { rows: [{ id: key, amount: i }], idempotencyKey: key },
              { board: 'ledger' },
            );
            acked.set(key, value<{ watermark: number }>(a).watermark);
          } catch {
            return; // connection refused or reset: the node is gone
          }
        }
      });
      while (acked.size < 150) await new Promise((r) => setTimeout(r, 10));
      await first.kill();
      killed = true;
      await Promise.all(workers);
      expect(first.proc.signalCode).toBe('SIGKILL');

      const second = await startNode(env);
      nodes.push(second);
      const retried = new Map<string, number>();
      for (const key of attempted) {
        const i = key.split('-')[2];
        const a = await rpc(
          second.url,
          'mutate.insert',
          { rows: [{ id: key, amount: Number(i) }], idempotencyKey: key },
          { board: 'ledger', headers: { 'x-data-idempotent': 'true' } },
        );
        retried.set(key, value<{ watermark: number }>(a).watermark);
      }
      // Every acknowledged write survived with the very same acknowledgement.
      for (const [key, w] of acked) expect(retried.get(key), key).toBe(w);
      // Nothing was applied twice: one row per attempted key, one change record per row.
      const out = value<{ result: { rows: unknown[][] }; watermark: number }>(
        await rpc(
          second.url,
          'query.execute',
          {
            sql: 'SELECT count(*), count(DISTINCT id) FROM {{t}}',
            tables: [{ token: 't', entity: 'items' }],
          },
          { board: 'ledger' },
        ),
      );
      expect(out.result.rows).toEqual([[attempted.size, attempted.size]]);
      expect(out.watermark).toBe(attempted.size);
      await second.stop();
    });
  });
}
