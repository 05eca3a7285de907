/**
 * The LISTEN connection of the change notifier comes back after PostgreSQL drops it, and each
 * connection it ran leaves nothing behind on the node's long-lived signal (a listener per
 * reconnect would pile up for as long as the store keeps dropping it).
 */
import { getEventListeners } from 'node:events';
import { describeOnServerPostgres, dropListenSession } from '@support/pg/testing';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import pino from 'pino';
import { expect } from 'vitest';
import { ChangeNotifier } from '../src/changelog/change-notifier.js';
import type { BoardDb } from '../src/store/database.js';
import { boardTest } from './fixtures.js';

describeOnServerPostgres('change notifier', () => {
  boardTest(
    'a LISTEN connection dropped by PostgreSQL is opened again, leaving no listener behind',
    async ({ testPostgres, onTestFinished }) => {
      const url = testPostgres.url();
      const db = new Kysely<BoardDb>({
        dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url }) }),
      });
      const stop = new AbortController();
      const running = new ChangeNotifier(db, url, 60_000, pino({ level: 'silent' })).run(stop.signal);
      onTestFinished(async () => {
        stop.abort();
        await running;
        await db.destroy();
      });
      await dropListenSession(url, 'board_changes', 0);
      const before = getEventListeners(stop.signal, 'abort').length;
      await dropListenSession(url, 'board_changes', 4);
      expect(getEventListeners(stop.signal, 'abort').length).toBe(before);
    },
  );
});
