/**
 * What `GET /v1/events` carries, declared once: each kind of record whose changes are events (one
 * trigger per table, orchd's migrations), each with `.created`, `.updated` and `.deleted`. The
 * route's summary, `orch events --type`'s help and the READMEs (checked by a test) are made from
 * this list, so they cannot miss a kind again.
 */
export const EVENT_KINDS = [
  'environment',
  'snapshot',
  'host',
  'build',
  'snapshot_export',
  'environment_move',
] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/** What happened to the record. */
export const EVENT_ACTIONS = ['created', 'updated', 'deleted'] as const;

/** Every event type: `<kind>.<action>`. */
export const EVENT_TYPES: readonly string[] = EVENT_KINDS.flatMap((k) =>
  EVENT_ACTIONS.map((a) => `${k}.${a}`),
);
