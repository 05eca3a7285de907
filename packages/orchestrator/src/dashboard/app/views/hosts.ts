// The Hosts page: registered host agents with state, health and capacity; cordon and remove.
import type { Host } from '@orch/protocol';
import { api } from '../api.js';
import { bar, h, mount } from '../dom.js';
import { action, deleteButton, emptyCard, section, stateCell, table } from '../widgets.js';

/** Renders the hosts table into `main` (polled). */
export async function hostsView(main: HTMLElement): Promise<void> {
  const { hosts } = await api<{ hosts: Host[] }>('GET', '/v1/hosts');
  const list = section(main, 'list');
  if (hosts.length === 0) {
    return mount(
      list,
      emptyCard(
        'No hosts yet',
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
    table(['Host', 'Kind', 'Arch', 'State', 'Health', 'CPUs', 'RAM', 'Disk', ''], hosts, (host) => {
      const path = `/v1/hosts/${encodeURIComponent(host.id)}`;
      const [label, busy, verb] =
        host.state === 'cordoned'
          ? ['Uncordon', 'Uncordoning…', 'uncordon']
          : ['Cordon', 'Cordoning…', 'cordon'];
      return h(
        'tr',
        { 'data-host': host.id },
        h(
          'td',
          {},
          h('a', { href: `#/hosts/${encodeURIComponent(host.id)}` }, host.id),
          h('div', { class: 'muted' }, host.agent_url),
        ),
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
          action(label, busy, async () => {
            await api('POST', `${path}?action=${verb}`);
            await refresh();
          }),
          ' ',
          deleteButton('Remove', 'Removing…', path, refresh, `Remove host ${host.id}?`),
        ),
      );
    }),
  );
}
