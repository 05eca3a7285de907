/**
 * The event hub's LISTEN connection comes back after PostgreSQL drops it, and each connection it
 * ran leaves nothing behind on orchd's long-lived signal (a listener per reconnect would pile up
 * for as long as the store keeps dropping it).
 */
import { getEventListeners } from 'node:events';
import { describeOnServerPostgres, dropListenSession, pgTest } from '@support/pg/testing';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import pino from 'pino';
import { expect } from 'vitest';
import { EventHub } from '../src/events/event-hub.js';
import type { Database } from '../src/store/schema.js';

describeOnServerPostgres('event hub', () => {
  pgTest(
    'a LISTEN connection dropped by PostgreSQL is opened again, leaving no listener behind',
    async ({ testPostgres, onTestFinished }) => {
      const url = testPostgres.url();
      const db = new Kysely<Database>({
        dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url }) }),
      });
      const stop = new AbortController();
      const running = new EventHub(db, url, pino({ level: 'silent' })).run(stop.signal);
      onTestFinished(async () => {
        stop.abort();
        await running;
        await db.destroy();
      });
      await dropListenSession(url, 'orch_events', 0);
      const before = getEventListeners(stop.signal, 'abort').length;
      await dropListenSession(url, 'orch_events', 4);
      expect(getEventListeners(stop.signal, 'abort').length).toBe(before);
    },
  );
});
