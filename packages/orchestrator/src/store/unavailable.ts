/**
 * Whether an error from the database driver means "the store cannot be reached right now" (as
 * opposed to a bad query): connection refused or reset, socket missing, pool timeout, server
 * shutting down or starting (SQLSTATE 57P01-57P03), connection exceptions (class 08).
 */
export function isStoreUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (
      ['ECONNREFUSED', 'ECONNRESET', 'ENOENT', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND'].includes(
        code,
      )
    )
      return true;
    if (/^57P0[1-3]$/.test(code) || code.startsWith('08')) return true;
  }
  return /Connection terminated|Query read timeout|timeout exceeded when trying to connect|Client has encountered a connection error|connect ECONNREFUSED|the database system is (starting up|shutting down)/i.test(
    err.message,
  );
}
