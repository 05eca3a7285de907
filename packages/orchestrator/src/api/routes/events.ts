import { EVENT_ACTIONS, EVENT_KINDS, OrchError } from '@orch/protocol';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import type { ConnectionGuard, CredentialEnded } from '../../auth/connection-guard.js';
import type { EventHub } from '../../events/event-hub.js';
import { type AnyRoute, route } from '../route.js';

const EVENT_ID = /^\d{1,18}$/;

/**
 * `GET /v1/events`: Server-Sent Events of environment, snapshot and host changes made through any
 * orchd on the database (see the README, "Events"). Resumes after `Last-Event-ID` (or `?after=`),
 * which must not be past the newest event id; without either, starts at the newest event. A
 * heartbeat comment every `heartbeatMs`. The stream is held by `guard`: when the caller's session
 * is logged out or expires, or its API key is revoked, it gets an `error` event (the 401 envelope)
 * and the stream ends.
 */
export function eventRoutes(hub: EventHub, guard: ConnectionGuard, heartbeatMs: number): AnyRoute[] {
  return [
    route({
      method: 'GET',
      path: '/v1/events',
      access: 'authenticated',
      tag: 'events',
      summary: `Event stream (text/event-stream): ${EVENT_KINDS.map((k) => `${k}.*`).join(', ')} (${EVENT_ACTIONS.join(', ')}); resumable with Last-Event-ID`,
      query: z.object({
        after: z
          .string()
          .regex(EVENT_ID, 'must be an event id (digits)')
          .optional()
          .describe('resume after this event id (Last-Event-ID wins when both are sent)'),
      }),
      success: {
        status: 200,
        mediaType: 'text/event-stream',
        description: 'text/event-stream; each event: id, event (its type), data (JSON)',
      },
      handler: async ({ query, c, principal }) => {
        const last = c.req.header('last-event-id');
        if (last !== undefined && !EVENT_ID.test(last))
          throw OrchError.invalid('Last-Event-ID: must be an event id (digits)');
        const given = last ?? query.after;
        let cursor = given !== undefined ? Number(given) : await hub.head();
        // A cursor from the future would wait, silently, until ids pass it: every event before
        // that would be lost. No stream can have seen an id the store has not handed out.
        if (given !== undefined) {
          const newest = await hub.lastId();
          if (cursor > newest) {
            const field = last !== undefined ? 'Last-Event-ID' : 'after';
            throw OrchError.invalid(`${field}: ${given} is past the newest event id, ${newest}`, {
              field,
              newest,
            });
          }
        }
        const raw = streamSSE(c, async (stream) => {
          const hold = guard.hold(principal);
          const closed = new AbortController();
          const close = () => closed.abort();
          try {
            stream.onAbort(close);
            // hub.stopped lives as long as the process: its listener goes with the stream.
            hub.stopped.addEventListener('abort', close, { once: true });
            hold.signal.addEventListener('abort', close, { once: true });
            let beatAt = Date.now() + heartbeatMs;
            await stream.write(': events\n\n');
            while (!closed.signal.aborted) {
              for (const e of await hub.read(cursor)) {
                if (hold.signal.aborted) break;
                await stream.writeSSE({
                  id: String(e.id),
                  event: e.type,
                  data: JSON.stringify({ ...e.data, at: e.at }),
                });
                cursor = e.id;
              }
              if (hold.signal.aborted) break;
              if (Date.now() >= beatAt) {
                await stream.write(': heartbeat\n\n');
                beatAt = Date.now() + heartbeatMs;
              }
              await hub.wait(Math.max(10, beatAt - Date.now()), closed.signal);
            }
            if (hold.signal.aborted) {
              const ended = hold.signal.reason as CredentialEnded;
              await stream.writeSSE({ event: 'error', data: JSON.stringify(ended.toBody()) });
            }
          } finally {
            hub.stopped.removeEventListener('abort', close);
            hold.release();
          }
        });
        raw.headers.set('cache-control', 'no-store');
        return { status: 200, raw };
      },
    }),
  ];
}
