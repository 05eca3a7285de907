/** `GET /metrics` of a real board-node process, scraped and parsed as Prometheus would. */
import { mintToken } from '@board/server';
import { describeStore } from '@support/pg/testing';
import { scrapeMetrics } from '@support/server/testing';
import { expect, it } from 'vitest';
import {
  boardTest,
  cli,
  type NodeProcess,
  nodeEnv,
  rpc,
  TOKEN_SECRET,
  tag,
  value,
  watch,
} from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];

describeStore('server')('board-node /metrics', () => {
  let node: NodeProcess;
  let admin: string;
  const scrape = () => scrapeMetrics(`${node.url}/metrics`);

  boardTest.beforeAll(async ({ openStore, tempDir, startNode }) => {
    const env = {
      ...nodeEnv(await openStore('server'), await tempDir('board-metrics-')),
      BOARD_TOKEN_SECRET: TOKEN_SECRET,
    };
    expect((await cli(['board', 'create', 'mboard', '--column', 'title:TEXT'], env)).code).toBe(0);
    node = await startNode({ ...env, BOARD_AUTH: 'on', BOARD_HEARTBEAT_MS: '300' });
    admin = await mintToken(TOKEN_SECRET, { boards: ['*'], verbs: ['read', 'write'], ttlSec: 3600 });
  });

  it('queries move the cache-mode series, mutations and errors their outcome tags', async () => {
    const before = await scrape();
    expect(before.family('process_cpu_seconds_total')?.type).toBe('COUNTER');
    const q = () =>
      rpc(
        node.url,
        'query.execute',
        { sql: 'SELECT count(*) AS n FROM {{t}}', tables: T },
        { board: 'mboard', token: admin },
      );
    expect(
      tag(
        await rpc(
          node.url,
          'mutate.insert',
          { rows: [{ id: 'r1', title: 'a' }] },
          { board: 'mboard', token: admin },
        ),
      ),
    ).toBe('ok');
    await q(); // first query of the board on this node: the replica is built
    await q(); // open and current: a hit
    const bad = await rpc(
      node.url,
      'query.execute',
      { sql: 'SELECT nope FROM {{t}}', tables: T },
      { board: 'mboard', token: admin },
    );
    const badTag = tag(bad);
    expect(badTag).not.toBe('ok');
    const refused = await rpc(
      node.url,
      'query.execute',
      { sql: 'SELECT 1', tables: T },
      { board: 'mboard', token: 'not-a-token' },
    );
    const w = await watch(node.url, {
      board: 'mboard',
      token: admin,
      after: 0,
      until: (items) => items.length > 0,
    });
    expect(w.status).toBe(200);

    const after = await scrape();
    const moved = (name: string, labels: Record<string, string> = {}) =>
      after.value(name, labels) - before.value(name, labels);
    expect(
      moved('board_node_replica_syncs_total', { mode: 'rebuild' }) +
        moved('board_node_replica_syncs_total', { mode: 'reattach' }),
    ).toBe(1);
    expect(moved('board_node_replica_syncs_total', { mode: 'hit' })).toBeGreaterThanOrEqual(1);
    expect(moved('board_node_procedure_calls_total', { procedure: 'query.execute', outcome: 'ok' })).toBe(2);
    expect(moved('board_node_procedure_calls_total', { procedure: 'mutate.insert', outcome: 'ok' })).toBe(1);
    expect(moved('board_node_procedure_calls_total', { procedure: 'query.execute', outcome: badTag })).toBe(
      1,
    );
    expect(
      moved('board_node_procedure_calls_total', { procedure: 'query.execute', outcome: tag(refused) }),
    ).toBe(1);
    expect(after.value('board_node_replicas_open')).toBe(1);
    expect(after.value('board_node_replica_memory_bytes')).toBeGreaterThan(0);
    expect(after.value('board_node_replica_memory_budget_bytes')).toBeGreaterThan(0);
    expect(after.family('board_node_watchers')?.type).toBe('GAUGE');
    expect(
      moved('board_node_http_requests_total', { route: '/rpc/:procedure', method: 'POST', status: '200' }),
    ).toBe(4);
    expect(moved('board_node_http_requests_total', { route: '/watch', method: 'GET', status: '200' })).toBe(
      1,
    );
    const labels = after.families.flatMap((f) => f.metrics.flatMap((s) => Object.values(s.labels ?? {})));
    expect(labels.some((v) => v.includes('mboard'))).toBe(false);
  });

  it('measures change lag from write to push for a live watcher', async () => {
    const before = (await scrape()).value('board_node_change_lag_seconds');
    const head = (
      value(
        await rpc(
          node.url,
          'mutate.insert',
          { rows: [{ id: 'r2', title: 'b' }] },
          { board: 'mboard', token: admin },
        ),
      ) as { watermark: number }
    ).watermark;
    // The write happens once the watcher is open and caught up (its first heartbeat comment).
    let wrote: ReturnType<typeof rpc> | undefined;
    const w = await watch(node.url, {
      board: 'mboard',
      token: admin,
      after: head,
      onItem: (item) => {
        if ('comment' in item && !wrote)
          wrote = rpc(
            node.url,
            'mutate.insert',
            { rows: [{ id: 'r3', title: 'c' }] },
            { board: 'mboard', token: admin },
          );
      },
      until: (items) => items.some((i) => 'event' in i && i.event === 'change'),
    });
    expect(tag(await wrote!)).toBe('ok');
    expect(w.items.some((i) => 'event' in i && i.event === 'change')).toBe(true);
    expect((await scrape()).value('board_node_change_lag_seconds')).toBe(before + 1);
  });

  it('counts open watch streams', async () => {
    let seen = -1;
    await watch(node.url, {
      board: 'mboard',
      token: admin,
      onItem: () => undefined,
      until: (items) => {
        if (items.some((i) => 'comment' in i) && seen < 0) {
          void scrape().then((m) => {
            seen = m.value('board_node_watchers');
          });
        }
        return seen >= 0;
      },
      timeoutMs: 5000,
    });
    expect(seen).toBeGreaterThanOrEqual(1);
  });
});
