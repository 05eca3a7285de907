// The GPU section of a host's page: detection state, whether whole GPUs can go to VMs (and what is
// missing), and each GPU as its agent detected it at the last health check.
import type { Host } from '@orch/protocol';
import { h } from '../dom.js';
import { table } from '../widgets.js';

/** The GPU section of host `host`, or nothing for a host that reports no GPU detection. */
export function gpuSection(host: Host): HTMLElement[] {
  const s = host.gpu_status;
  if (s === null) return [];
  const passthrough = s.passthrough.available
    ? 'whole GPUs can be passed to VMs (VFIO)'
    : `detects GPUs but cannot pass them to VMs: missing ${s.passthrough.missing.join('; ')}`;
  return [
    h('h3', {}, 'GPUs'),
    h(
      'p',
      { 'data-gpu-state': s.state },
      `Detection: ${s.state}${s.detail ? ` — ${s.detail}` : ''}${s.driver_version ? ` (driver ${s.driver_version})` : ''}`,
    ),
    h('p', { 'data-gpu-passthrough': String(s.passthrough.available) }, passthrough),
    table(
      ['#', 'Model', 'Name', 'Memory', 'PCI', 'Driver', 'IOMMU group', 'MIG', 'Held by'],
      host.gpu_devices,
      (d) =>
        h(
          'tr',
          { 'data-gpu': d.uuid },
          h('td', {}, String(d.index)),
          h('td', {}, d.model ?? '—'),
          h('td', {}, d.name),
          h('td', {}, `${Math.round(d.memory_mb / 1024)} GiB`),
          h('td', {}, d.pci_address),
          h('td', {}, d.driver ?? '—'),
          h('td', {}, d.iommu_group === null ? 'none' : String(d.iommu_group)),
          h(
            'td',
            {},
            d.mig_mode === 'enabled'
              ? `on: ${d.mig_instances.length} instance(s) ${[...new Set(d.mig_instances.map((i) => i.profile))].join(', ')}`
              : d.mig_mode,
          ),
          h('td', {}, d.held_by ?? '—'),
        ),
    ),
  ];
}
