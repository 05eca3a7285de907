import { api } from './api.js';
import { h, mount } from './dom.js';
import { showLogin } from './login.js';
import { type Session, startShell } from './shell.js';

/**
 * The orchd dashboard: a single page with hash routes (#/hosts, #/environments, #/snapshots,
 * #/keys, #/new). Live lists re-render on each event of `GET /v1/events`; every error shows the API's
 * `error.message`. Secrets are never rendered, except a new API key's secret, once.
 *
 * Layout: `shell.ts` (header, routes, the event stream), `login.ts`, one file per page in `views/`, shared
 * pieces in `widgets.ts` and `dom.ts`, the API call in `api.ts`.
 */
const root = document.getElementById('root')!;

async function start(): Promise<void> {
  const session = await api<Session>('GET', '/session');
  if (location.pathname === '/login') {
    if (session.authenticated) return location.replace('/');
    return showLogin(root);
  }
  if (!session.authenticated) return location.replace('/login');
  startShell(root, session);
}

start().catch((err: unknown) => {
  mount(root, h('p', { class: 'error' }, `The dashboard could not start: ${(err as Error).message}`));
});
