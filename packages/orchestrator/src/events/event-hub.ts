import { type Logger, type Service, sleep } from '@support/server';
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import type { Database } from '../store/schema.js';

/** One event of `GET /v1/events` (see the README, "Events"). */
export interface OrchEvent {
  /** Increasing; the SSE `id`, resumable with `Last-Event-ID`. */
  readonly id: number;
  /** `environment.created|updated|deleted`, `snapshot.*`, `host.*`. */
  readonly type: string;
  readonly data: Record<string, unknown>;
  readonly at: string;
}

/** How long a missing id may still be a transaction in flight (ids are taken before commit). */
export const GAP_WAIT_MS = 5000;
/** How long events are kept for resuming. */
const RETENTION = '24 hours';
/** Reads the table this often even without a NOTIFY (a lost LISTEN connection). */
const POLL_MS = 2000;

/**
 * The event feed of every orchd sharing the database: triggers write events in the transaction of
 * each change and NOTIFY `orch_events`; this service LISTENs on a connection of its own (reconnecting
 * after a loss, polling meanwhile) and wakes the open streams, which read the table from their cursor.
 */
export class EventHub implements Service {
  readonly name = 'events';
  private waiters = new Set<() => void>();
  private readonly stopping = new AbortController();
  /** Aborts when the hub stops: open streams end then. */
  readonly stopped: AbortSignal = this.stopping.signal;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly connectionString: string,
    private readonly logger: Logger,
  ) {}

  /** Listens until `signal` aborts; trims events past retention now and then. */
  async run(signal: AbortSignal): Promise<void> {
    const poll = setInterval(() => this.wake(), POLL_MS);
    let trimmedAt = 0;
    try {
      while (!signal.aborted) {
        if (Date.now() - trimmedAt > 600_000) {
          trimmedAt = Date.now();
          await sql`DELETE FROM orch_events WHERE created_at < now() - ${RETENTION}::interval`
            .execute(this.db)
            .catch((err: Error) => this.logger.warn({ err: err.message }, 'events: trim failed'));
        }
        await this.listen(signal).catch((err: Error) =>
          this.logger.warn({ err: err.message }, 'events: LISTEN connection lost; polling until it is back'),
        );
        await sleep(1000, signal);
      }
    } finally {
      clearInterval(poll);
      this.stopping.abort();
      this.wake();
    }
  }

  private async listen(signal: AbortSignal): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString, connectionTimeoutMillis: 3000 });
    // The run's signal outlives every connection: each connection's listener goes with it.
    let stop: () => void = () => undefined;
    const ended = new Promise<void>((resolve, reject) => {
      client.on('error', reject);
      client.on('end', () => resolve());
      stop = resolve;
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', stop, { once: true });
    });
    client.on('notification', () => this.wake());
    try {
      await client.connect();
      await client.query('LISTEN orch_events');
      this.wake();
      await ended;
    } finally {
      signal.removeEventListener('abort', stop);
      await client.end().catch(() => undefined);
    }
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = new Set();
    for (const w of waiters) w();
  }

  /** Resolves at the next NOTIFY (or poll tick), after `ms`, or when `signal` aborts. */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** The newest event id (0 when there is none): where a stream without `Last-Event-ID` starts. */
  async head(): Promise<number> {
    const r = await this.db
      .selectFrom('orch_events')
      .select((eb) => eb.fn.max('id').as('id'))
      .executeTakeFirst();
    return Number(r?.id ?? 0);
  }

  /**
   * The newest event id ever handed out (0 when none was), whether or not its event is still kept
   * or committed yet: no stream can have seen a later one, so a cursor past it is refused.
   */
  async lastId(): Promise<number> {
    const r = await sql<{ id: string | null }>`
      SELECT pg_sequence_last_value(pg_get_serial_sequence('orch_events', 'id')::regclass) AS id`.execute(
      this.db,
    );
    return Number(r.rows[0]?.id ?? 0);
  }

  /**
   * Events after `cursor`, in order, stopping before a gap younger than {@link GAP_WAIT_MS}: ids
   * are taken before commit, so a missing id may be a transaction still in flight (delivered next
   * time); an older gap is a rolled-back one and is skipped.
   */
  async read(cursor: number, limit = 500): Promise<OrchEvent[]> {
    const rows = await this.db
      .selectFrom('orch_events')
      .select(['id', 'type', 'payload', 'created_at'])
      .where('id', '>', String(cursor) as never)
      .orderBy('id')
      .limit(limit)
      .execute();
    const out: OrchEvent[] = [];
    let expected = cursor + 1;
    for (const r of rows) {
      const id = Number(r.id);
      if (id !== expected && Date.now() - r.created_at.getTime() < GAP_WAIT_MS) break;
      out.push({
        id,
        type: r.type,
        data: r.payload as Record<string, unknown>,
        at: r.created_at.toISOString(),
      });
      expected = id + 1;
    }
    return out;
  }
}
