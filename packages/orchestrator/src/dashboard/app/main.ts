import { compileSource, formatDiagnostic, renderText } from '@orch/envdef';
import type { ApiKey, CreatedApiKey, Environment, ExecResult, Host, Snapshot } from '@orch/protocol';
import { Terminal } from '@xterm/xterm';
import { ApiError, api } from './api.js';
import { ago, bar, h, mount, toast } from './dom.js';

/**
 * The orchd dashboard: a single page with hash routes (#/hosts, #/environments, #/snapshots,
 * #/keys, #/new). Live state comes from polling the API every 2 s; every error shows the API's
 * `error.message`. Secrets are never rendered, except a new API key's secret, once.
 */
interface Session {
  authenticated: boolean;
  auth: 'required' | 'disabled';
  api_keys: boolean;
}

const POLL_MS = 2000;
const root = document.getElementById('root')!;
let session: Session;
let poll: number | undefined;

async function start(): Promise<void> {
  session = await api<Session>('GET', '/session');
  if (location.pathname === '/login') {
    if (session.authenticated) return location.replace('/');
    return showLogin();
  }
  if (!session.authenticated) return location.replace('/login');
  window.addEventListener('hashchange', route);
  route();
}

function showLogin(): void {
  const token = h('input', {
    type: 'password',
    name: 'token',
    placeholder: 'master token',
    autocomplete: 'current-password',
  });
  const error = h('p', { class: 'error', role: 'alert' });
  const form = h(
    'form',
    {
      class: 'card login',
      onsubmit: async (e) => {
        e.preventDefault();
        error.textContent = '';
        try {
          await api('POST', '/login', { token: token.value });
          location.assign('/');
        } catch (err) {
          error.textContent = (err as Error).message;
        }
      },
    },
    h('h2', {}, 'Log in to orchd'),
    h('p', { class: 'muted' }, 'Paste the master token (ORCH_AUTH_TOKEN).'),
    token,
    h('button', { class: 'primary', type: 'submit' }, 'Log in'),
    error,
  );
  mount(root, form);
  token.focus();
}

const VIEWS: Record<
  string,
  { title: string; render: (main: HTMLElement) => Promise<void> | void; live: boolean }
> = {
  hosts: { title: 'Hosts', render: hostsView, live: true },
  environments: { title: 'Environments', render: environmentsView, live: true },
  snapshots: { title: 'Snapshots', render: snapshotsView, live: true },
  keys: { title: 'API keys', render: keysView, live: false },
  new: { title: 'New environment', render: newEnvironmentView, live: false },
};

function route(): void {
  const name = location.hash.replace(/^#\//, '') || 'environments';
  const view = VIEWS[name] ?? VIEWS.environments!;
  window.clearInterval(poll);
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
      await view.render(main);
    } catch (err) {
      toast((err as Error).message);
    }
  };
  void render();
  if (view.live) poll = window.setInterval(render, POLL_MS);
}

/** Runs a click handler with the button disabled and its label showing progress; errors become toasts. */
function action(label: string, busy: string, fn: () => Promise<unknown>, cls = ''): HTMLButtonElement {
  const b = h('button', { class: cls }, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    b.textContent = busy;
    try {
      await fn();
    } catch (err) {
      toast((err as Error).message);
    } finally {
      b.disabled = false;
      b.textContent = label;
    }
  });
  return b;
}

function stateCell(state: string): HTMLElement {
  return h('td', { class: `state-${state}` }, state);
}

/** Keeps a table's surrounding panels (exec boxes, terminals) while its rows refresh. */
function section(main: HTMLElement, key: string): HTMLElement {
  let el = main.querySelector<HTMLElement>(`[data-section="${key}"]`);
  if (!el) {
    el = h('div', { 'data-section': key });
    main.append(el);
  }
  return el;
}

async function hostsView(main: HTMLElement): Promise<void> {
  const { hosts } = await api<{ hosts: Host[] }>('GET', '/v1/hosts');
  const list = section(main, 'list');
  if (hosts.length === 0) {
    return mount(
      list,
      h(
        'div',
        { class: 'card' },
        h('h2', {}, 'No hosts yet'),
        h(
          'p',
          {},
          'Start a host agent (npx orch-agent) and register it: npx orch host register --url http://127.0.0.1:9090',
        ),
      ),
    );
  }
  const refresh = () => hostsView(main);
  mount(
    list,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['Host', 'Kind', 'Arch', 'State', 'Health', 'CPUs', 'RAM', 'Disk', ''].map((t) =>
            h('th', {}, t),
          ),
        ),
      ),
      h(
        'tbody',
        {},
        ...hosts.map((host) =>
          h(
            'tr',
            { 'data-host': host.id },
            h('td', {}, host.id, h('div', { class: 'muted' }, host.agent_url)),
            h('td', {}, host.kind),
            h('td', {}, host.arch),
            stateCell(host.state),
            h('td', { class: `state-${host.health}`, title: host.health_detail ?? '' }, host.health),
            h('td', {}, bar(host.capacity.cpus - host.free.cpus, host.capacity.cpus, 'cpus')),
            h('td', {}, bar(host.capacity.ram_mb - host.free.ram_mb, host.capacity.ram_mb, 'MiB')),
            h('td', {}, bar(host.capacity.disk_gb - host.free.disk_gb, host.capacity.disk_gb, 'GiB')),
            h(
              'td',
              {},
              host.state === 'cordoned'
                ? action('Uncordon', 'Uncordoning…', async () => {
                    await api('POST', `/v1/hosts/${encodeURIComponent(host.id)}?action=uncordon`);
                    await refresh();
                  })
                : action('Cordon', 'Cordoning…', async () => {
                    await api('POST', `/v1/hosts/${encodeURIComponent(host.id)}?action=cordon`);
                    await refresh();
                  }),
              ' ',
              action(
                'Remove',
                'Removing…',
                async () => {
                  if (confirm(`Remove host ${host.id}?`))
                    await api('DELETE', `/v1/hosts/${encodeURIComponent(host.id)}`);
                  await refresh();
                },
                'danger',
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

async function environmentsView(main: HTMLElement): Promise<void> {
  const { environments } = await api<{ environments: Environment[] }>('GET', '/v1/environments');
  const list = section(main, 'list');
  section(main, 'panel');
  const now = Date.now();
  if (environments.length === 0) {
    return mount(
      list,
      h(
        'div',
        { class: 'card' },
        h('h2', {}, 'No environments yet'),
        h('p', {}, 'Create one from a definition file: '),
        h('a', { href: '#/new' }, 'New environment'),
      ),
    );
  }
  mount(
    list,
    h('div', { class: 'row' }, h('a', { href: '#/new' }, '+ New environment')),
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['Environment', 'State', 'Host', 'Resources', 'Ports', 'Age', 'Time left', ''].map((t) =>
            h('th', {}, t),
          ),
        ),
      ),
      h(
        'tbody',
        {},
        ...environments.map((env) => {
          const left =
            env.expires_at && env.state === 'running' ? (Date.parse(env.expires_at) - now) / 1000 : undefined;
          const live = env.state === 'running';
          return h(
            'tr',
            { 'data-env': env.id },
            h('td', {}, env.id, h('div', { class: 'muted' }, env.task_id)),
            h(
              'td',
              { class: `state-${env.state}`, title: env.last_error ?? '' },
              env.state,
              env.last_error ? h('div', { class: 'error' }, env.last_error) : null,
            ),
            h('td', {}, env.host_id),
            h('td', {}, `${env.spec.cpus} cpu · ${env.spec.ram_mb} MiB · ${env.spec.storage_gb} GiB`),
            h(
              'td',
              {},
              ...env.ports.map((p) =>
                h(
                  'div',
                  {},
                  h('a', { href: p.url, target: '_blank', rel: 'noopener' }, `${p.as} (${p.port})`),
                ),
              ),
            ),
            h('td', {}, ago((now - Date.parse(env.created_at)) / 1000)),
            h('td', {}, left === undefined ? '—' : ago(left)),
            h(
              'td',
              {},
              live ? h('button', { onclick: () => openExec(main, env) }, 'Exec') : null,
              ' ',
              live ? h('button', { onclick: () => openConsole(main, env) }, 'Console') : null,
              ' ',
              live ? action('Snapshot', 'Snapshotting…', () => snapshot(env, false)) : null,
              ' ',
              live ? action('Live snapshot', 'Snapshotting…', () => snapshot(env, true)) : null,
              ' ',
              ['creating', 'running'].includes(env.state)
                ? action(
                    'Stop',
                    'Stopping…',
                    async () => {
                      await api('DELETE', `/v1/environments/${env.id}`);
                      await environmentsView(main);
                    },
                    'danger',
                  )
                : null,
            ),
          );
        }),
      ),
    ),
  );
}

async function snapshot(env: Environment, live: boolean): Promise<void> {
  const s = await api<Snapshot>('POST', `/v1/environments/${env.id}/snapshots`, { live });
  if (s.state === 'error') throw new Error(s.last_error ?? 'the snapshot failed');
  toast(
    `Snapshot ${s.id} (${s.kind}) is ${s.state}${live && s.kind === 'disk' ? ': this host could only take a disk snapshot' : ''}`,
  );
  document.querySelector('.toast')?.classList.add('muted');
}

function openExec(main: HTMLElement, env: Environment): void {
  const cmd = h('input', { name: 'command', placeholder: 'echo hi', size: 50 });
  const out = h('pre', { 'data-output': '' }, 'Output appears here.');
  const run = action(
    'Run',
    'Running…',
    async () => {
      const argv = cmd.value.trim().split(/\s+/).filter(Boolean);
      if (argv.length === 0) throw new Error('type a command first');
      const r = await api<ExecResult>('POST', `/v1/environments/${env.id}?action=exec`, {
        argv: ['sh', '-c', cmd.value],
      });
      const decode = (b64: string) =>
        new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
      out.textContent = `${decode(r.stdout_base64)}${decode(r.stderr_base64)}\n[exit ${r.timed_out ? 'timed out' : r.exit_code}${r.truncated ? ', output cut' : ''}]`;
    },
    'primary',
  );
  cmd.addEventListener('keydown', (e) => e.key === 'Enter' && run.click());
  mount(
    section(main, 'panel'),
    h('div', { class: 'card' }, h('h3', {}, `Exec in ${env.id}`), h('div', { class: 'row' }, cmd, run), out),
  );
  cmd.focus();
}

function openConsole(main: HTMLElement, env: Environment): void {
  const box = h('div', { class: 'terminal' });
  const close = h('button', {}, 'Close');
  mount(
    section(main, 'panel'),
    h('div', { class: 'card' }, h('div', { class: 'row' }, h('h3', {}, `Console of ${env.id}`), close), box),
  );
  const term = new Terminal({ convertEol: false, fontSize: 13 });
  term.open(box);
  const ws = new WebSocket(
    `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/environments/${env.id}/attach`,
  );
  ws.binaryType = 'arraybuffer';
  ws.onmessage = (m) => term.write(new Uint8Array(m.data as ArrayBuffer));
  ws.onclose = () => term.write('\r\n[console closed]\r\n');
  term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(new TextEncoder().encode(d)));
  close.addEventListener('click', () => {
    ws.close();
    term.dispose();
    section(main, 'panel').replaceChildren();
  });
  term.focus();
}

async function snapshotsView(main: HTMLElement): Promise<void> {
  const { snapshots } = await api<{ snapshots: Snapshot[] }>('GET', '/v1/snapshots');
  const list = section(main, 'list');
  if (snapshots.length === 0) {
    return mount(
      list,
      h(
        'div',
        { class: 'card' },
        h('h2', {}, 'No snapshots yet'),
        h(
          'p',
          {},
          'Take one from a running environment on the Environments page (Snapshot or Live snapshot).',
        ),
      ),
    );
  }
  mount(
    list,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['Snapshot', 'Kind', 'State', 'Size', 'Digest', 'Retention', 'Exports', ''].map((t) =>
            h('th', {}, t),
          ),
        ),
      ),
      h(
        'tbody',
        {},
        ...snapshots.map((s) =>
          h(
            'tr',
            { 'data-snapshot': s.id },
            h('td', {}, s.id, h('div', { class: 'muted' }, `of ${s.vm_id}`)),
            h('td', {}, s.kind),
            stateCell(s.state ?? ''),
            h('td', {}, s.size_bytes === undefined ? '—' : `${(s.size_bytes / 1048576).toFixed(1)} MiB`),
            h('td', { title: s.digest ?? '' }, s.digest ? `${s.digest.slice(0, 12)}…` : '—'),
            h('td', {}, s.retention_until ? new Date(s.retention_until).toLocaleString() : 'kept'),
            h('td', {}, ...(s.exports ?? []).map((e) => h('div', {}, `${e.destination}: ${e.status ?? ''}`))),
            h(
              'td',
              {},
              s.state === 'ready'
                ? action('Restore', 'Restoring…', async () => {
                    const env = await api<Environment>('POST', `/v1/snapshots/${s.id}/restore`, {});
                    toast(`Restoring into ${env.id}`);
                    location.hash = '#/environments';
                  })
                : null,
              ' ',
              action(
                'Delete',
                'Deleting…',
                async () => {
                  await api('DELETE', `/v1/snapshots/${s.id}`);
                  await snapshotsView(main);
                },
                'danger',
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

async function keysView(main: HTMLElement): Promise<void> {
  const label = h('input', { name: 'label', placeholder: 'what the key is for' });
  const created = h('div');
  const list = h('div');
  const refresh = async () => {
    const { api_keys } = await api<{ api_keys: ApiKey[] }>('GET', '/v1/api-keys');
    mount(
      list,
      api_keys.length === 0
        ? h('p', { class: 'muted' }, 'No API keys. Create one for a script or a CI job.')
        : h(
            'table',
            {},
            h(
              'thead',
              {},
              h('tr', {}, ...['Key', 'Label', 'Hint', 'Created', 'Last used', ''].map((t) => h('th', {}, t))),
            ),
            h(
              'tbody',
              {},
              ...api_keys.map((k) =>
                h(
                  'tr',
                  {},
                  h('td', {}, k.id),
                  h('td', {}, k.label),
                  h('td', {}, k.hint),
                  h('td', {}, k.created_at),
                  h('td', {}, k.last_used_at ?? 'never'),
                  h(
                    'td',
                    {},
                    action(
                      'Revoke',
                      'Revoking…',
                      async () => {
                        await api('DELETE', `/v1/api-keys/${k.id}`);
                        await refresh();
                      },
                      'danger',
                    ),
                  ),
                ),
              ),
            ),
          ),
    );
  };
  const create = action(
    'Create key',
    'Creating…',
    async () => {
      const key = await api<CreatedApiKey>('POST', '/v1/api-keys', { label: label.value });
      const secret = h('code', { class: 'secret' }, key.secret);
      mount(
        created,
        h(
          'div',
          { class: 'card' },
          h('p', {}, 'Copy the secret now: it is shown only this once.'),
          h(
            'div',
            { class: 'row' },
            secret,
            h('button', { onclick: () => void navigator.clipboard?.writeText(key.secret) }, 'Copy'),
          ),
          h('button', { onclick: () => created.replaceChildren() }, 'Done'),
        ),
      );
      label.value = '';
      await refresh();
    },
    'primary',
  );
  mount(main, h('div', { class: 'row' }, label, create), created, list);
  await refresh();
}

function newEnvironmentView(main: HTMLElement): void {
  const text = h(
    'textarea',
    { name: 'definition', rows: 18, spellcheck: 'false' },
    'version: 1\nimage: debian-12\nresources:\n  cpus: 1\n  memory: 512MiB\nrun:\n  - echo ready\n',
  );
  const taskId = h('input', { name: 'task_id', value: 'dashboard' });
  const file = h('input', { type: 'file', accept: '.yaml,.yml,.json' });
  const preview = h('pre', { 'data-preview': '' });
  const secrets = h('div');
  const status = h('p', { class: 'muted' });
  let values: Record<string, HTMLInputElement> = {};
  const compile = () => {
    const r = compileSource(text.value, { taskId: taskId.value || 'dashboard' });
    if (!r.ok) {
      preview.textContent = r.diagnostics.map((d) => formatDiagnostic('orch.yaml', d)).join('\n');
      preview.classList.add('error');
      return undefined;
    }
    preview.classList.remove('error');
    preview.textContent = renderText(r.compiled);
    const names = r.compiled.request.required_secrets;
    if (names.join() !== Object.keys(values).join()) {
      values = Object.fromEntries(
        names.map((n) => [n, h('input', { type: 'password', name: `secret-${n}`, placeholder: n })]),
      );
      mount(
        secrets,
        ...(names.length
          ? [
              h('h3', {}, 'Secrets'),
              ...names.map((n) => h('div', { class: 'row' }, h('label', {}, n), values[n]!)),
            ]
          : []),
      );
    }
    return r.compiled;
  };
  text.addEventListener('input', compile);
  taskId.addEventListener('input', compile);
  file.addEventListener('change', async () => {
    const f = file.files?.[0];
    if (f) {
      text.value = await f.text();
      compile();
    }
  });
  const create = action(
    'Create environment',
    'Creating…',
    async () => {
      const compiled = compile();
      if (!compiled) throw new Error('fix the definition first (see the preview)');
      const missing = Object.entries(values)
        .filter(([, i]) => i.value === '')
        .map(([n]) => n);
      if (missing.length) throw new Error(`missing secrets: ${missing.join(', ')}`);
      const { required_secrets: _r, ...body } = compiled.request;
      let env = await api<Environment>('POST', '/v1/environments', {
        ...body,
        secrets: Object.fromEntries(Object.entries(values).map(([n, i]) => [n, i.value])),
      });
      const started = Date.now();
      while (env.state === 'creating') {
        status.textContent = `${env.id}: creating on ${env.host_id} (${Math.round((Date.now() - started) / 1000)}s)…`;
        await new Promise((r) => setTimeout(r, 500));
        env = await api<Environment>('GET', `/v1/environments/${env.id}`);
      }
      if (env.state === 'error')
        throw new ApiError('internal', env.last_error ?? 'the environment failed', 500);
      status.textContent = `${env.id} is ${env.state}.`;
      location.hash = '#/environments';
    },
    'primary',
  );
  mount(
    main,
    h(
      'div',
      { class: 'two' },
      h(
        'div',
        {},
        h('h3', {}, 'Definition (orch.yaml)'),
        h('div', { class: 'row' }, file, h('label', {}, 'task id'), taskId),
        text,
        secrets,
        h('div', { class: 'row' }, create),
        status,
      ),
      h('div', {}, h('h3', {}, 'Compile preview'), preview),
    ),
  );
  compile();
}

start().catch((err: unknown) => {
  mount(root, h('p', { class: 'error' }, `The dashboard could not start: ${(err as Error).message}`));
});
