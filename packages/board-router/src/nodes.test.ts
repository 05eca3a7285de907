import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from './log.js';
import { createMetrics } from './metrics.js';
import { NodePool } from './nodes.js';

describe('NodePool', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  it('dials an IPv6 literal node URL (the address without its brackets) and the default port 80', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, nodeId: 'v6-node' }));
    });
    await new Promise<void>((r) => server.listen(0, '::1', r));
    cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
    const { port } = server.address() as AddressInfo;
    const pool = new NodePool([`http://[::1]:${port}`, 'http://a.invalid'], {
      intervalMs: 60_000,
      timeoutMs: 5_000,
      balance: 'round-robin',
      log: createLogger('silent'),
      metrics: createMetrics(),
    });
    cleanups.push(() => pool.stop());
    expect(pool.nodes.map((n) => [n.host, n.port])).toEqual([
      ['::1', port],
      ['a.invalid', 80],
    ]);
    await pool.run();
    expect(pool.nodes[0]).toMatchObject({ state: 'up', id: 'v6-node' });
  });
});
