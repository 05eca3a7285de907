/**
 * `@support/pg/testing` itself: the server PostgreSQL makes an outage and recovers, `freePort` gives
 * a port a server can take, and cleanups run last-first, all of them, even when one fails.
 */
import { createServer } from 'node:net';
import { isStoreUnavailable } from '@support/pg';
import { Cleanups, freePort, pgTest } from '@support/pg/testing';
import { describe, expect, it } from 'vitest';
import { query } from './query.js';

describe('@support/pg/testing', () => {
  pgTest('TestPostgres: a database per caller, an outage, and back', async ({ testPostgres }) => {
    const url = await testPostgres.createDatabase('suite_a');
    expect(url).toBe(`postgres://postgres:test@127.0.0.1:${testPostgres.port}/suite_a`);
    await query(url, 'CREATE TABLE t AS SELECT 1 AS n');
    await testPostgres.halt('immediate');
    expect(isStoreUnavailable(await query(url, 'SELECT 1').catch((e: unknown) => e))).toBe(true);
    await testPostgres.resume();
    expect(await query(url, 'SELECT n FROM t')).toEqual([{ n: 1 }]);
  });

  pgTest(
    'TestPostgres: a start that fails says why, with the end of the server log',
    async ({ testPostgres }) => {
      await testPostgres.halt('fast');
      const squatter = createServer();
      await new Promise<void>((resolve, reject) => {
        squatter.once('error', reject);
        squatter.listen(testPostgres.port, '127.0.0.1', resolve);
      });
      try {
        await expect(testPostgres.resume()).rejects.toThrow(/server log \(end\):[\s\S]*could not bind/);
      } finally {
        await new Promise((r) => squatter.close(r));
      }
      await testPostgres.resume();
      expect(await query(testPostgres.url(), 'SELECT 1 AS n')).toEqual([{ n: 1 }]);
    },
  );

  it('freePort: a loopback port a server can listen on', async () => {
    const port = await freePort();
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    await new Promise((r) => server.close(r));
  });

  it('Cleanups: last registered first, every step even after a failure, the first failure rethrown', async () => {
    const ran: string[] = [];
    const cleanups = new Cleanups();
    cleanups.add('a', () => ran.push('a'));
    cleanups.add('b', () => {
      ran.push('b');
      throw new Error('b failed');
    });
    expect(cleanups.add('c', async () => ran.push('c'))).toBe('c');
    await expect(cleanups.run()).rejects.toThrow('b failed');
    expect(ran).toEqual(['c', 'b', 'a']);
    await cleanups.run();
    expect(ran).toHaveLength(3);
  });
});
