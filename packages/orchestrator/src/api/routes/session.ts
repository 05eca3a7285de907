import {
  LoginRequest,
  OrchError,
  SESSION_COOKIE,
  SESSION_MAX_AGE_SECONDS,
  SessionState,
} from '@orch/protocol';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { Authenticator } from '../../auth/authenticator.js';
import type { BrowserSessions } from '../../auth/browser-sessions.js';
import type { ConnectionGuard } from '../../auth/connection-guard.js';
import type { LoginThrottle } from '../../auth/login-throttle.js';
import { clientAddress } from '../client-address.js';
import { type AnyRoute, route } from '../route.js';

/**
 * `POST /login` and `POST /logout` (orchestrator.md, "Browser session"). Login takes the master
 * token and sets an opaque signed session cookie; a wrong token sets nothing and counts against
 * the client in `throttle`, which refuses (429) a client, or everyone, after too many failures.
 * Logout revokes the session in the store (every `orchd` on it refuses the value from then on),
 * closes at once this orchd's connections opened with it (`guard`; other orchds close theirs at
 * their next re-check), and clears the cookie; a cookie that is no live session is just cleared.
 */
export function sessionRoutes(
  auth: Authenticator,
  sessions: BrowserSessions | undefined,
  throttle: LoginThrottle,
  secureCookies: boolean,
  guard: ConnectionGuard,
): AnyRoute[] {
  const authMode = auth.passThrough ? 'disabled' : 'required';
  const secure = (url: string) => secureCookies || url.startsWith('https:');
  return [
    route({
      method: 'POST',
      path: '/login',
      access: 'public',
      tag: 'session',
      summary: 'Log a browser in with the master token; sets the orch_session cookie',
      body: LoginRequest,
      errors: [401, 429],
      success: {
        status: 200,
        schema: SessionState,
        description: 'Logged in (or authentication is disabled)',
      },
      handler: async ({ body, c }) => {
        if (auth.passThrough) return { status: 200, body: { authenticated: true, auth: authMode } };
        if (!sessions)
          throw new OrchError(
            'unauthorized',
            'this orchestrator has no master token to log in with',
            undefined,
            401,
          );
        // Before the comparison: a throttled client learns nothing, not even from the right token.
        const address = clientAddress(c);
        const waitMs = throttle.refusal(address);
        if (waitMs !== undefined) {
          const seconds = Math.ceil(waitMs / 1000);
          throw OrchError.rateLimited(`too many failed logins: try again in ${seconds} s`, seconds);
        }
        if (!auth.isMaster(body.token)) {
          throttle.failed(address);
          throw new OrchError('unauthorized', 'wrong token', undefined, 401);
        }
        setCookie(c, SESSION_COOKIE, sessions.issue(), {
          httpOnly: true,
          sameSite: 'Lax',
          secure: secure(c.req.url),
          path: '/',
          maxAge: SESSION_MAX_AGE_SECONDS,
        });
        return { status: 200, body: { authenticated: true, auth: authMode } };
      },
    }),
    route({
      method: 'POST',
      path: '/logout',
      access: 'public',
      tag: 'session',
      summary: 'End the browser session on every orchd and clear the cookie',
      success: { status: 200, schema: SessionState, description: 'Logged out' },
      handler: async ({ c }) => {
        // Revoke first: if the store cannot record it, the answer is 503 and the cookie is kept,
        // so the browser does not believe a session ended that a copy of the cookie could still use.
        const value = getCookie(c, SESSION_COOKIE);
        const ended = value !== undefined ? await sessions?.end(value) : undefined;
        if (ended) guard.sessionEnded(ended.sid);
        deleteCookie(c, SESSION_COOKIE, {
          path: '/',
          httpOnly: true,
          sameSite: 'Lax',
          secure: secure(c.req.url),
        });
        return { status: 200, body: { authenticated: auth.passThrough, auth: authMode } };
      },
    }),
  ];
}
