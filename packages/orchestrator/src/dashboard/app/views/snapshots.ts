// The Snapshots page: snapshots with size, digest, retention and exports; restore and delete.
import type { Environment, Snapshot } from '@orch/protocol';
import { api } from '../api.js';
import { h, mount, toast } from '../dom.js';
import { action, section, stateCell } from '../widgets.js';

/** Renders the snapshots table into `main` (polled). */
export async function snapshotsView(main: HTMLElement): Promise<void> {
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
