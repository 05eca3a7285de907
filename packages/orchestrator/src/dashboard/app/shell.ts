// The dashboard's shell: header, navigation, hash routes, and live pages re-rendered from the event stream.
import { api } from './api.js';
import { h, mount, toast } from './dom.js';
import { leavePage } from './page.js';
import { keysView } from './views/api-keys.js';
import { environmentView } from './views/environment.js';
import { environmentsView } from './views/environments.js';
import { hostView } from './views/host.js';
import { hostsView } from './views/hosts.js';
import { newEnvironmentView } from './views/new-environment.js';
import { snapshotsView } from './views/snapshots.js';

/** What `GET /session` says about the visitor and this orchd. */
export interface Session {
  authenticated: boolean;
  auth: 'required' | 'disabled';
  api_keys: boolean;
}

/** Events that arrive together (a create moves several records) re-render once. */
const DEBOUNCE_MS = 150;
/** The live page's re-render, called on each event of `GET /v1/events`; none on other pages. */
let onEvent: (() => void) | undefined;
let pending: number | undefined;
let events: EventSource | undefined;
interface View {
  title: string;
  render: (main: HTMLElement) => Promise<void> | void;
  /** The page of one item, `#/<name>/<id>` (an environment, a host). */
  item?: (main: HTMLElement, id: string) => Promise<void> | void;
  live: boolean;
}

const VIEWS: Record<string, View> = {
  hosts: { title: 'Hosts', render: hostsView, item: hostView, live: true },
  environments: { title: 'Environments', render: environmentsView, item: environmentView, live: true },
  snapshots: { title: 'Snapshots', render: snapshotsView, live: true },
  keys: { title: 'API keys', render: keysView, live: false },
  new: { title: 'New environment', render: newEnvironmentView, live: false },
};

/** Shows the page the location hash names, and again whenever the hash changes. */
export function startShell(root: HTMLElement, session: Session): void {
  const route = () => showRoute(root, session);
  window.addEventListener('hashchange', route);
  // One stream for the page's lifetime (same-origin, the session cookie authenticates it); the
  // browser reconnects by itself after a drop, resuming with Last-Event-ID.
  events = new EventSource('/v1/events');
  const changed = () => {
    window.clearTimeout(pending);
    pending = window.setTimeout(() => onEvent?.(), DEBOUNCE_MS);
  };
  for (const kind of ['environment', 'snapshot', 'host'])
    for (const what of ['created', 'updated', 'deleted']) events.addEventListener(`${kind}.${what}`, changed);
  // After a drop the stream resumes without loss, but a list may have missed nothing or a trimmed
  // event: render again when it is back.
  events.addEventListener('open', changed);
  route();
}

function showRoute(root: HTMLElement, session: Session): void {
  const [first = '', ...rest] = location.hash.replace(/^#\//, '').split('/');
  const name = first in VIEWS ? first : 'environments';
  const view = VIEWS[name]!;
  const item = rest.length > 0 && view.item ? decodeURIComponent(rest.join('/')) : undefined;
  onEvent = undefined;
  leavePage();
  const main = h('main');
  const nav = h(
    'nav',
    {},
    ...Object.entries(VIEWS)
      .filter(([k]) => k !== 'keys' || session.api_keys)
      .map(([k, v]) => h('a', { href: `#/${k}`, class: k === name ? 'active' : '' }, v.title)),
  );
  const logout = h(
    'button',
    {
      onclick: async () => {
        // No re-render (and no 401 from it) may race the navigation to the login page.
        onEvent = undefined;
        events?.close();
        leavePage();
        await api('POST', '/logout').catch(() => undefined);
        location.assign('/login');
      },
    },
    'Log out',
  );
  mount(
    root,
    h(
      'header',
      {},
      h('h1', {}, 'orchd'),
      nav,
      h('span', { class: 'spacer' }),
      session.auth === 'required' ? logout : null,
    ),
    session.auth === 'disabled'
      ? h(
          'div',
          { class: 'banner' },
          'Authentication is disabled on this orchd (no master token, no key store): anyone who can reach it can do anything.',
        )
      : null,
    main,
  );
  const render = async () => {
    try {
      if (item !== undefined) await view.item!(main, item);
      else await view.render(main);
    } catch (err) {
      toast((err as Error).message);
    }
  };
  void render();
  if (view.live) onEvent = () => void render();
}
