import { readFileSync } from 'node:fs';
import { OrchError, SESSION_COOKIE } from '@orch/protocol';
import type { Hono } from 'hono';
import { getCookie } from 'hono/cookie';
import type { Authenticator } from '../auth/authenticator.js';

const ASSETS: Record<string, string> = {
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
  'xterm.css': 'text/css; charset=utf-8',
};

/**
 * The browser dashboard: `GET /` and `GET /login` serve the single-page app, `/assets/*` its bundle
 * (built into dist/dashboard at install time, read once at start, served from memory), and
 * `GET /session` tells the page whether it is logged in. `/` sends a browser without a valid
 * session to `/login` (with pass-through auth it opens directly).
 */
export function mountDashboard(app: Hono, auth: Authenticator, apiKeys: boolean, assetsDir: URL): void {
  const files = new Map<string, Buffer>();
  for (const name of [...Object.keys(ASSETS), 'index.html']) {
    try {
      files.set(name, readFileSync(new URL(name, assetsDir)));
    } catch {
      // Not built: the pages answer 503 below with a clear message.
    }
  }
  const html = files.get('index.html');
  const security = {
    'content-security-policy':
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
  };
  const page = () =>
    html
      ? new Response(new Uint8Array(html), {
          headers: { 'content-type': 'text/html; charset=utf-8', ...security },
        })
      : new Response('the dashboard is not built: run npm install (or npm run build)', { status: 503 });

  const signedIn = async (authorization: string | undefined, cookie: string | undefined) => {
    try {
      await auth.authenticate({ authorization, sessionCookie: cookie });
      return true;
    } catch {
      return false;
    }
  };

  app.get('/', async (c) => {
    if (!(await signedIn(undefined, getCookie(c, SESSION_COOKIE)))) return c.redirect('/login', 302);
    return page();
  });
  app.get('/login', () => page());
  app.get('/session', async (c) =>
    c.json(
      {
        authenticated: await signedIn(c.req.header('authorization'), getCookie(c, SESSION_COOKIE)),
        auth: auth.passThrough ? 'disabled' : 'required',
        api_keys: apiKeys,
      },
      200,
      { 'cache-control': 'no-store' },
    ),
  );
  app.get('/assets/:file', (c) => {
    const name = c.req.param('file');
    const body = files.get(name);
    const type = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
    if (!body || !type) throw OrchError.notFound('asset', name.slice(0, 100));
    return new Response(new Uint8Array(body), {
      headers: { 'content-type': type, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' },
    });
  });
}
