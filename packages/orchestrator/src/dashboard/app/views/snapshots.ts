// The Snapshots page: snapshots with size, digest, retention and exports; restore and delete.
import type { Environment, Snapshot } from '@orch/protocol';
import { api } from '../api.js';
import { type Child, h, mount } from '../dom.js';
import { action, deleteButton, emptyCard, section, stateCell, table } from '../widgets.js';

/** Renders the snapshots table into `main` (polled). */
export async function snapshotsView(main: HTMLElement): Promise<void> {
  const { snapshots } = await api<{ snapshots: Snapshot[] }>('GET', '/v1/snapshots');
  const list = section(main, 'list');
  if (snapshots.length === 0) {
    return mount(
      list,
      emptyCard(
        'No snapshots yet',
        h(
          'p',
          {},
          'Take one from a running environment on the Environments page (Snapshot or Live snapshot).',
        ),
      ),
    );
  }
  const columns = ['Snapshot', 'Kind', 'State', 'Size', 'Digest', 'Retention', 'Exports', ''];
  mount(
    list,
    table(columns, snapshots, (s) =>
      h(
        'tr',
        { 'data-snapshot': s.id },
        h(
          'td',
          {},
          s.id,
          h('div', { class: 'muted' }, 'of ', h('a', { href: `#/environments/${s.vm_id}` }, s.vm_id)),
        ),
        h('td', {}, s.kind),
        stateCell(s.state ?? ''),
        h('td', {}, s.size_bytes === undefined ? '—' : `${(s.size_bytes / 1048576).toFixed(1)} MiB`),
        h('td', { title: s.digest ?? '' }, s.digest ? `${s.digest.slice(0, 12)}…` : '—'),
        h('td', {}, s.retention_until ? new Date(s.retention_until).toLocaleString() : 'kept'),
        h('td', {}, ...(s.exports ?? []).map((e) => h('div', {}, `${e.destination}: ${e.status ?? ''}`))),
        h('td', {}, ...snapshotActions(s, () => snapshotsView(main))),
      ),
    ),
  );
}

/**
 * Restore (a ready snapshot: a new environment, whose page then shows the restore's progress) and
 * Delete (then `refresh`).
 */
export function snapshotActions(s: Snapshot, refresh: () => Promise<unknown>): Child[] {
  return [
    s.state === 'ready'
      ? action('Restore', 'Restoring…', async () => {
          const env = await api<Environment>('POST', `/v1/snapshots/${s.id}/restore`, {});
          location.hash = `#/environments/${env.id}`;
        })
      : null,
    ' ',
    deleteButton('Delete', 'Deleting…', `/v1/snapshots/${s.id}`, refresh),
  ];
}
