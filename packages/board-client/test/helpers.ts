/**
 * Test helpers: HS256 capability tokens (the claim layout of `@board/protocol`), signed with
 * node:crypto so that client tests need no server package, and fetch wrappers that record or fail.
 */
import { createHmac } from 'node:crypto';

const b64url = (s: string | Buffer) => Buffer.from(s).toString('base64url');

/** Signs a token with claims `{ boards, exp }` (and `pin` when given). */
export function token(
  secret: string,
  boards: Record<string, ('read' | 'write')[]>,
  extra: { pin?: string; sub?: string; exp?: number } = {},
): string {
  const head = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const now = Math.floor(Date.now() / 1000);
  const body = b64url(JSON.stringify({ boards, iat: now, exp: now + 3600, ...extra }));
  const sig = createHmac('sha256', secret).update(`${head}.${body}`).digest('base64url');
  return `${head}.${body}.${sig}`;
}

/** One request a recording fetch saw. */
export interface Seen {
  url: string;
  headers: Headers;
  body: string | undefined;
}

/**
 * A fetch that records every request and fails the first `failures` of them with a network
 * error (a TypeError, as undici's `fetch failed`), then delegates to the platform fetch.
 */
export function flakyFetch(failures: number): { fetch: typeof fetch; seen: Seen[] } {
  const seen: Seen[] = [];
  let left = failures;
  const f: typeof fetch = async (input, init) => {
    const url = String(input);
    if (!url.endsWith('/health')) {
      seen.push({
        url,
        headers: new Headers(init?.headers),
        body: typeof init?.body === 'string' ? init.body : undefined,
      });
      if (left > 0) {
        left--;
        throw new TypeError('fetch failed (injected)');
      }
    }
    return await fetch(input, init);
  };
  return { fetch: f, seen };
}
