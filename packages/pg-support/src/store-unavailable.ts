/** Node's socket errors that mean "the server is not there right now". */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOENT', // the Unix socket of a stopped embedded PostgreSQL
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);

/**
 * SQLSTATEs of a server that cannot take work now: class 08 (connection exception), class 53
 * (insufficient resources: too many connections, disk full, out of memory) and 57P01-57P05
 * (shutting down, crashed, starting up, database dropped, idle session ended). Not 57014: a
 * cancelled query is the query's failure, not the store's.
 */
const SQLSTATE = /^(08|53)...$|^57P0[1-5]$/;

/** What `pg` says when a connection dies or never comes (it sets no code on these). */
const MESSAGES =
  /Connection terminated|Query read timeout|timeout exceeded when trying to connect|Client has encountered a connection error|connect ECONNREFUSED|the database system is (starting up|shutting down|in recovery mode)/i;

/**
 * Whether an error from the database driver means "the store cannot be reached right now" (answered
 * as the product's unavailable error, retried at start) as opposed to a bad query. The one rule both
 * orchd and board-node use.
 *
 * @example
 * ```ts
 * try { await db.selectFrom('hosts').selectAll().execute(); }
 * catch (err) { if (isStoreUnavailable(err)) throw unavailable('the store is unavailable'); throw err; }
 * ```
 */
export function isStoreUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || SQLSTATE.test(code))) return true;
  return typeof message === 'string' && MESSAGES.test(message);
}
