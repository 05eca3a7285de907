// The page of one host (#/hosts/<id>): its record, GPUs, images, and capacity over the last hour drawn
// from what its agent reported at each health check (GET /v1/hosts/{id}/capacity).
import type { Host, HostCapacityHistory, Resources } from '@orch/protocol';
import { api } from '../api.js';
import { bar, h, mount } from '../dom.js';
import { onLeave } from '../page.js';
import { section, stateCell, table } from '../widgets.js';
import { capacityRuns } from './capacity-runs.js';
import { gpuSection } from './host-gpus.js';

/** How often the open page reads the capacity history again (health checks add a point every 15 s). */
const REFRESH_MS = 15_000;

const SERIES: { key: keyof Resources; label: string; color: string }[] = [
  { key: 'cpus', label: 'CPUs', color: '#2457c5' },
  { key: 'ram_mb', label: 'RAM', color: '#1e7b34' },
  { key: 'disk_gb', label: 'Disk', color: '#b26b00' },
];

/** Renders host `id` into `main`; re-rendered on host events and every {@link REFRESH_MS}. */
export async function hostView(main: HTMLElement, id: string): Promise<void> {
  const path = `/v1/hosts/${encodeURIComponent(id)}`;
  const [host, history] = await Promise.all([
    api<Host>('GET', path),
    api<HostCapacityHistory>('GET', `${path}/capacity?minutes=60`),
  ]);
  const summary = section(main, 'summary');
  if (!summary.dataset.timer) {
    const timer = window.setInterval(() => void hostView(main, id).catch(() => undefined), REFRESH_MS);
    summary.dataset.timer = String(timer);
    onLeave(() => window.clearInterval(timer));
  }
  const used = (r: keyof Resources) => host.capacity[r] - host.free[r];
  mount(
    summary,
    h('div', { class: 'row' }, h('a', { href: '#/hosts' }, '← Hosts')),
    h('h2', { 'data-host-page': host.id }, host.id, h('span', { class: 'muted' }, ` ${host.agent_url}`)),
    table(['Kind', 'Arch', 'Accelerator', 'Version', 'State', 'Health', 'Last seen'], [host], () =>
      h(
        'tr',
        {},
        h('td', {}, host.kind),
        h('td', {}, host.arch),
        h('td', {}, host.accelerator),
        h('td', {}, host.version),
        stateCell(host.state),
        h('td', { class: `state-${host.health}`, title: host.health_detail ?? '' }, host.health),
        h('td', {}, host.last_seen_at ? new Date(host.last_seen_at).toLocaleTimeString() : '—'),
      ),
    ),
    h(
      'div',
      { class: 'row' },
      bar(used('cpus'), host.capacity.cpus, 'cpus'),
      bar(used('ram_mb'), host.capacity.ram_mb, 'MiB'),
      bar(used('disk_gb'), host.capacity.disk_gb, 'GiB'),
    ),
  );
  mount(section(main, 'gpus'), ...gpuSection(host));
  mount(section(main, 'capacity'), h('h3', {}, 'Capacity used, last hour'), chart(history));
  mount(
    section(main, 'images'),
    h('h3', {}, 'Images'),
    table(['Image', 'Size', 'Source', 'Digest'], host.image_details, (i) =>
      h(
        'tr',
        {},
        h('td', {}, i.name),
        h('td', {}, `${(i.size_bytes / 1048576).toFixed(0)} MiB`),
        h('td', {}, i.source),
        h('td', { title: i.digest ?? '' }, i.digest ? `${i.digest.slice(0, 12)}…` : '—'),
      ),
    ),
  );
}

/** A line chart (SVG) of the share of CPUs, RAM and disk in use at each point of `history`. */
function chart(history: HostCapacityHistory): HTMLElement {
  const NS = 'http://www.w3.org/2000/svg';
  const W = 600;
  const H = 100;
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  const end = Date.now();
  const start = end - history.minutes * 60_000;
  const x = (at: string) => ((Date.parse(at) - start) / (end - start)) * W;
  for (const share of [0, 0.5, 1]) {
    const grid = document.createElementNS(NS, 'line');
    for (const [k, v] of Object.entries({ x1: 0, x2: W, y1: H - share * H, y2: H - share * H }))
      grid.setAttribute(k, String(v));
    grid.setAttribute('stroke', '#dde2e7');
    grid.setAttribute('vector-effect', 'non-scaling-stroke');
    svg.append(grid);
  }
  // One line per run of samples: a period when the host was down is a gap (capacity-runs.ts).
  const runs = capacityRuns(history.samples, history.bucket_seconds);
  for (const s of SERIES) {
    runs.forEach((run, i) => {
      const points = run.map((p) => {
        const total = p.capacity[s.key];
        const share = total > 0 ? (total - p.free[s.key]) / total : 0;
        return `${x(p.at).toFixed(1)},${(H - share * H).toFixed(1)}`;
      });
      // A lone sample is drawn as a dot (a line from the point to itself, with round caps).
      if (points.length === 1) points.push(points[0] ?? '');
      const line = document.createElementNS(NS, 'polyline');
      line.setAttribute('points', points.join(' '));
      line.setAttribute('fill', 'none');
      line.setAttribute('stroke', s.color);
      line.setAttribute('stroke-width', '2');
      line.setAttribute('stroke-linecap', 'round');
      line.setAttribute('vector-effect', 'non-scaling-stroke');
      line.setAttribute('data-series', s.key);
      line.setAttribute('data-run', String(i));
      svg.append(line);
    });
  }
  const last = history.samples.at(-1);
  const share = (k: keyof Resources) =>
    last && last.capacity[k] > 0
      ? Math.round(((last.capacity[k] - last.free[k]) / last.capacity[k]) * 100)
      : 0;
  return h(
    'div',
    { class: 'chart', 'data-chart': String(history.samples.length) },
    history.samples.length === 0
      ? h('p', { class: 'muted' }, 'No samples yet: the first health check adds one.')
      : svg,
    h(
      'div',
      { class: 'legend' },
      ...SERIES.map((s) => h('span', { style: `color:${s.color}` }, `${s.label} ${share(s.key)}%`)),
      h('span', { class: 'muted' }, `0-100% of capacity, one point per ${history.bucket_seconds} s`),
    ),
  );
}
