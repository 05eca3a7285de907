import {
  LoginRequest,
  OrchError,
  SESSION_COOKIE,
  SESSION_MAX_AGE_SECONDS,
  SessionState,
} from '@orch/protocol';
import { deleteCookie, setCookie } from 'hono/cookie';
import type { Authenticator } from '../../auth/authenticator.js';
import type { SessionSigner } from '../../auth/session-cookie.js';
import { type AnyRoute, route } from '../route.js';

/**
 * `POST /login` and `POST /logout` (orchestrator.md, "Browser session"). Login takes the master
 * token and sets an opaque signed session cookie; a wrong token sets nothing.
 */
export function sessionRoutes(
  auth: Authenticator,
  sessions: SessionSigner | undefined,
  secureCookies: boolean,
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
      success: {
        status: 200,
        schema: SessionState,
        description: 'Logged in (or authentication is disabled)',
      },
      handler: async ({ body, c }) => {
        if (auth.passThrough) return { status: 200, body: { authenticated: true, auth: authMode } };
        if (!sessions || !auth.isMaster(body.token)) {
          const why = sessions ? 'wrong token' : 'this orchestrator has no master token to log in with';
          throw new OrchError('unauthorized', why, undefined, 401);
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
      summary: 'Clear the session cookie',
      success: { status: 200, schema: SessionState, description: 'Logged out' },
      handler: async ({ c }) => {
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
