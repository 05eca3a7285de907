// The page of one environment (#/environments/<id>): its record and progress, actions, services,
// snapshots, and its startup or service log followed live.
import type { Environment, Snapshot } from '@orch/protocol';
import { api } from '../api.js';
import { ago, h, mount } from '../dom.js';
import { onLeave } from '../page.js';
import { action, deleteButton, progress, section, stateCell, table } from '../widgets.js';
import { openConsole } from './console.js';
import { takeSnapshot } from './environments.js';
import { openExec } from './exec-panel.js';
import { followLog } from './log-panel.js';
import { snapshotActions } from './snapshots.js';

/** A service of the environment as its record lists it (the services issue adds them). */
interface ServiceStatus {
  name: string;
  image: string;
  state: string;
  restarts: number;
  exit_code?: number | null;
  ports: number[];
}

/** What each transitional state is doing, for its progress line. */
const BUSY: Partial<Record<Environment['state'], string>> = {
  creating: 'Creating',
  pausing: 'Pausing',
  resuming: 'Resuming',
  stopping: 'Stopping',
};

/** Renders environment `id` into `main`; re-rendered on every event (the log panel stays open). */
export async function environmentView(main: HTMLElement, id: string): Promise<void> {
  const [env, { snapshots }] = await Promise.all([
    api<Environment>('GET', `/v1/environments/${encodeURIComponent(id)}`),
    api<{ snapshots: Snapshot[] }>('GET', `/v1/snapshots?vm_id=${encodeURIComponent(id)}`),
  ]);
  const services = (env as Environment & { services?: ServiceStatus[] }).services ?? [];
  const now = Date.now();
  const busy = BUSY[env.state];
  const from = env.restored_from_snapshot_id ?? env.seed_snapshot_id;
  mount(
    section(main, 'summary'),
    h('div', { class: 'row' }, h('a', { href: '#/environments' }, '← Environments')),
    h(
      'h2',
      { 'data-env-page': env.id },
      env.id,
      ' ',
      h('span', { class: `state-${env.state}`, 'data-state': '' }, env.state),
    ),
    busy
      ? progress(
          `${busy}${env.state === 'creating' && from ? ` from ${from}` : ''} on ${env.host_id}`,
          Date.parse(env.state === 'creating' ? env.created_at : env.updated_at),
        )
      : null,
    env.last_error ? h('p', { class: 'error' }, env.last_error) : null,
    table(['Task', 'Host', 'Resources', 'Ports', 'Age', 'Time left', 'From'], [env], () =>
      h(
        'tr',
        {},
        h('td', {}, env.task_id),
        h('td', {}, h('a', { href: `#/hosts/${encodeURIComponent(env.host_id)}` }, env.host_id)),
        h('td', {}, `${env.spec.cpus} cpu · ${env.spec.ram_mb} MiB · ${env.spec.storage_gb} GiB`),
        h(
          'td',
          {},
          ...env.ports.map((p) =>
            h('div', {}, h('a', { href: p.url, target: '_blank', rel: 'noopener' }, `${p.as} (${p.port})`)),
          ),
        ),
        h('td', {}, ago((now - Date.parse(env.created_at)) / 1000)),
        h(
          'td',
          {},
          env.expires_at && env.state === 'running' ? ago((Date.parse(env.expires_at) - now) / 1000) : '—',
        ),
        h('td', {}, from ?? '—'),
      ),
    ),
  );
  mount(section(main, 'actions'), h('div', { class: 'row' }, ...actions(main, env)));
  section(main, 'progress');
  section(main, 'panel');
  mount(
    section(main, 'services'),
    services.length === 0
      ? null
      : h(
          'div',
          {},
          h('h3', {}, 'Services'),
          table(['Service', 'Image', 'State', 'Restarts', 'Exit', 'Ports'], services, (s) =>
            h(
              'tr',
              { 'data-service': s.name },
              h('td', {}, s.name),
              h('td', {}, s.image),
              stateCell(s.state),
              h('td', {}, s.restarts),
              h('td', {}, s.exit_code ?? '—'),
              h('td', {}, s.ports.join(', ')),
            ),
          ),
        ),
  );
  mount(
    section(main, 'snapshots'),
    h('h3', {}, 'Snapshots'),
    snapshots.length === 0
      ? h('p', { class: 'muted' }, 'No snapshots of this environment.')
      : table(['Snapshot', 'Kind', 'State', 'Size', 'Created', ''], snapshots, (s) =>
          h(
            'tr',
            { 'data-snapshot': s.id },
            h('td', {}, s.id),
            h('td', {}, s.kind),
            stateCell(s.state ?? ''),
            h('td', {}, s.size_bytes === undefined ? '—' : `${(s.size_bytes / 1048576).toFixed(1)} MiB`),
            h('td', {}, new Date(s.created_at).toLocaleString()),
            h('td', {}, ...snapshotActions(s, () => environmentView(main, id))),
          ),
        ),
  );
  logPanel(main, env, services);
}

/** The buttons for what can be done to `env` in its state. */
function actions(main: HTMLElement, env: Environment): HTMLButtonElement[] {
  const refresh = () => environmentView(main, env.id);
  const live = env.state === 'running';
  const snapshot = (kind: 'disk' | 'live') =>
    action(kind === 'live' ? 'Live snapshot' : 'Snapshot', 'Snapshotting…', async () => {
      const shown = progress(
        kind === 'live' ? 'Taking a live snapshot (disk and memory)' : 'Taking a disk snapshot',
        Date.now(),
      );
      mount(section(main, 'progress'), shown);
      try {
        await takeSnapshot(env, kind === 'live');
      } finally {
        shown.remove();
      }
      await refresh();
    });
  return [
    live ? h('button', { onclick: () => openExec(main, env) }, 'Exec') : null,
    live ? h('button', { onclick: () => openConsole(main, env) }, 'Console') : null,
    live ? snapshot('disk') : null,
    live ? snapshot('live') : null,
    live
      ? action('Pause', 'Pausing…', async () => {
          await api('POST', `/v1/environments/${env.id}?action=pause`);
          await refresh();
        })
      : null,
    env.state === 'paused'
      ? action('Resume', 'Resuming…', async () => {
          await api('POST', `/v1/environments/${env.id}?action=resume`);
          await refresh();
        })
      : null,
    ['creating', 'running', 'paused'].includes(env.state)
      ? deleteButton('Stop', 'Stopping…', `/v1/environments/${env.id}`, refresh)
      : null,
  ].filter((b): b is HTMLButtonElement => b !== null);
}

/**
 * The log panel: the startup log (or a service's, chosen above it) followed live. Opened once per
 * visit and per choice; re-renders keep it and its stream.
 */
function logPanel(main: HTMLElement, env: Environment, services: ServiceStatus[]): void {
  const panel = section(main, 'log');
  const names = services.map((s) => s.name);
  const shown = panel.dataset.services;
  if (shown === names.join(',')) return;
  panel.dataset.services = names.join(',');
  const out = h('pre', { 'data-log': '' });
  const which = h(
    'select',
    { name: 'log' },
    h('option', { value: '' }, 'startup script'),
    ...names.map((n) => h('option', { value: n }, `service ${n}`)),
  );
  let stop = followLog(env.id, undefined, out);
  which.addEventListener('change', () => {
    stop();
    out.textContent = '';
    stop = followLog(env.id, which.value || undefined, out);
  });
  onLeave(() => stop());
  mount(panel, h('div', { class: 'row' }, h('h3', {}, 'Log'), names.length ? which : null), out);
}
