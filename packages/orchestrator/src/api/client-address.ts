import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';

/**
 * The TCP peer address of a request (what the CIDR allowlist and the login throttle judge), or
 * undefined when the request did not come through a socket. Forwarding headers
 * (`X-Forwarded-For`, `Forwarded`) are never trusted: `orchd` has no trusted-proxy setting.
 */
export function clientAddress(c: Context): string | undefined {
  try {
    return getConnInfo(c).remote.address;
  } catch {
    return undefined;
  }
}
