// The Environments page: environments with their ports and time left; exec, console, snapshot,
// pause, resume, stop. Each id opens the environment's own page (environment.ts).
import type { Environment, Snapshot } from '@orch/protocol';
import { api } from '../api.js';
import { ago, h, mount, toast } from '../dom.js';
import { action, deleteButton, emptyCard, section, table } from '../widgets.js';
import { openConsole } from './console.js';
import { openExec } from './exec-panel.js';

/** Renders the environments table into `main` (polled); panels below it survive the refresh. */
export async function environmentsView(main: HTMLElement): Promise<void> {
  const { environments } = await api<{ environments: Environment[] }>('GET', '/v1/environments');
  const list = section(main, 'list');
  section(main, 'panel');
  const now = Date.now();
  if (environments.length === 0) {
    return mount(
      list,
      emptyCard(
        'No environments yet',
        h('p', {}, 'Create one from a definition file: '),
        h('a', { href: '#/new' }, 'New environment'),
      ),
    );
  }
  const columns = ['Environment', 'State', 'Host', 'Resources', 'Ports', 'Age', 'Time left', ''];
  mount(
    list,
    h('div', { class: 'row' }, h('a', { href: '#/new' }, '+ New environment')),
    table(columns, environments, (env) => {
      // Paused: no time passes (max runtime counts running time only).
      const left =
        env.expires_at && env.state === 'running' ? (Date.parse(env.expires_at) - now) / 1000 : undefined;
      const live = env.state === 'running';
      return h(
        'tr',
        { 'data-env': env.id },
        h(
          'td',
          {},
          h('a', { href: `#/environments/${env.id}` }, env.id),
          h('div', { class: 'muted' }, env.task_id),
        ),
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
            h('div', {}, h('a', { href: p.url, target: '_blank', rel: 'noopener' }, `${p.as} (${p.port})`)),
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
          live ? action('Snapshot', 'Snapshotting…', () => takeSnapshot(env, false)) : null,
          ' ',
          live ? action('Live snapshot', 'Snapshotting…', () => takeSnapshot(env, true)) : null,
          ' ',
          live ? action('Pause', 'Pausing…', () => pauseOrResume(main, env, 'pause')) : null,
          env.state === 'paused'
            ? action('Resume', 'Resuming…', () => pauseOrResume(main, env, 'resume'))
            : null,
          ' ',
          ['creating', 'running', 'paused'].includes(env.state)
            ? deleteButton('Stop', 'Stopping…', `/v1/environments/${env.id}`, () => environmentsView(main))
            : null,
        ),
      );
    }),
  );
}

/** `?action=pause|resume` of `env`, then the table again (its state, ports and time left). */
async function pauseOrResume(main: HTMLElement, env: Environment, act: 'pause' | 'resume'): Promise<void> {
  await api<Environment>('POST', `/v1/environments/${env.id}?action=${act}`);
  await environmentsView(main);
}

/** Takes a snapshot of `env` (with memory when `live`) and says what it became. */
export async function takeSnapshot(env: Environment, live: boolean): Promise<void> {
  const s = await api<Snapshot>('POST', `/v1/environments/${env.id}/snapshots`, { live });
  if (s.state === 'error') throw new Error(s.last_error ?? 'the snapshot failed');
  toast(
    `Snapshot ${s.id} (${s.kind}) is ${s.state}${live && s.kind === 'disk' ? ': this host could only take a disk snapshot' : ''}`,
  );
  document.querySelector('.toast')?.classList.add('muted');
}
