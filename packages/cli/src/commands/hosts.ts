import { checkAgentUrl, Host, HostDrain, HostList, MoveList } from '@orch/protocol';
import { NoContent } from '../api-client.js';
import { UsageError } from '../errors.js';
import { checkId, HOST_ID_KIND, idSegment } from '../ids.js';
import { table } from '../table.js';
import { client } from './client.js';
import type { OutputMode } from './preview.js';

const path = (id: string) => `/v1/hosts/${idSegment(HOST_ID_KIND, id)}`;
const pct = (free: number, total: number) => (total === 0 ? '-' : `${total - free}/${total}`);

function hostRows(hosts: readonly Host[]): string {
  return table(
    ['ID', 'KIND', 'ARCH', 'STATE', 'HEALTH', 'CPUS', 'RAM MB', 'DISK GB', 'URL'],
    hosts.map((h) => [
      h.id,
      h.kind,
      h.arch,
      h.state,
      h.health,
      pct(h.free.cpus, h.capacity.cpus),
      pct(h.free.ram_mb, h.capacity.ram_mb),
      pct(h.free.disk_gb, h.capacity.disk_gb),
      h.agent_url,
    ]),
  );
}

function show(host: Host, output: OutputMode): string {
  return output === 'json' ? `${JSON.stringify(host, null, 2)}\n` : hostRows([host]);
}

/**
 * `orch host register --url U [--kind] [--token] [--id] [--label k=v]`. The URL and the id are
 * checked here too, with the server's rules, before anything is sent.
 */
export async function registerHost(
  opts: { url: string; kind: string; token?: string; id?: string; label?: string[] },
  output: OutputMode,
): Promise<string> {
  const checked = checkAgentUrl(opts.url);
  if (!checked.ok) throw new UsageError(checked.reason);
  if (opts.id !== undefined) checkId(HOST_ID_KIND, opts.id, '--id');
  const pairs = (opts.label ?? []).map((l) => {
    const [k, ...v] = l.split('=');
    if (!k || v.length === 0) throw new UsageError(`--label ${JSON.stringify(l)} must look like key=value`);
    return [k, v.join('=')] as const;
  });
  // fromEntries defines own properties: a label named `__proto__` is a label.
  const labels: Record<string, string> = Object.fromEntries(pairs);
  const host = await (await client()).call(Host, 'POST', '/v1/hosts', {
    kind: opts.kind,
    agent_url: checked.url,
    labels,
    ...(opts.token ? { agent_token: opts.token } : {}),
    ...(opts.id !== undefined ? { id: opts.id } : {}),
  });
  return show(host, output);
}

export async function listHosts(output: OutputMode): Promise<string> {
  const { hosts } = await (await client()).call(HostList, 'GET', '/v1/hosts');
  if (output === 'json') return `${JSON.stringify({ hosts }, null, 2)}\n`;
  if (hosts.length === 0)
    return 'no hosts: register one with `orch host register --url http://<agent>:9090`\n';
  return hostRows(hosts);
}

/**
 * `orch host get <id>`: the host's row, its health detail, and for a GPU host its detection state,
 * whether it can pass GPUs to VMs (or what is missing) and one row per GPU.
 */
export async function getHost(id: string, output: OutputMode): Promise<string> {
  const hostPath = path(id);
  const host = await (await client()).call(Host, 'GET', hostPath);
  if (output === 'json') return show(host, output);
  const out = [hostRows([host]).trimEnd()];
  if (host.health_detail) out.push(`health detail: ${host.health_detail}`);
  const s = host.gpu_status;
  if (s !== null) {
    out.push(
      `gpu detection: ${s.state}${s.detail ? ` (${s.detail})` : ''}${s.driver_version ? `, driver ${s.driver_version}` : ''}`,
      `gpu passthrough: ${s.passthrough.available ? 'yes (VFIO)' : `no: missing ${s.passthrough.missing.join('; ')}`}`,
    );
    if (host.gpu_devices.length > 0)
      out.push(
        table(
          ['GPU', 'MODEL', 'NAME', 'MEMORY MB', 'PCI', 'DRIVER', 'IOMMU', 'MIG', 'HELD BY'],
          host.gpu_devices.map((d) => [
            String(d.index),
            d.model ?? '-',
            d.name,
            String(d.memory_mb),
            d.pci_address,
            d.driver ?? '-',
            d.iommu_group === null ? '-' : String(d.iommu_group),
            d.mig_mode === 'enabled' ? migSummary(d.mig_instances) : d.mig_mode,
            d.held_by ?? '-',
          ]),
        ).trimEnd(),
      );
  }
  return `${out.join('\n')}\n`;
}

/** `7x 1g.10gb` for the MIG instances of one GPU. */
function migSummary(instances: readonly { profile: string }[]): string {
  const counts = new Map<string, number>();
  for (const i of instances) counts.set(i.profile, (counts.get(i.profile) ?? 0) + 1);
  return counts.size === 0 ? 'on, no instance' : [...counts].map(([p, n]) => `${n}x ${p}`).join(' ');
}

/** `orch host images <id>`: the images the host boots, with size, digest and source. */
export async function hostImages(id: string, output: OutputMode): Promise<string> {
  const hostPath = path(id);
  const host = await (await client()).call(Host, 'GET', hostPath);
  const images = host.image_details;
  if (output === 'json') return `${JSON.stringify({ images }, null, 2)}\n`;
  if (images.length === 0 && host.images.length === 0) return `host ${id} reports no images\n`;
  // An agent older than image details reports only names.
  const rows =
    images.length > 0
      ? images.map((i) => [i.name, `${(i.size_bytes / 2 ** 20).toFixed(0)} MiB`, i.digest ?? '-', i.source])
      : host.images.map((n) => [n, '-', '-', '-']);
  return table(['NAME', 'SIZE', 'DIGEST', 'SOURCE'], rows);
}

export async function setHostState(
  id: string,
  action: 'cordon' | 'uncordon',
  output: OutputMode,
): Promise<string> {
  const hostPath = `${path(id)}?action=${action}`;
  return show(await (await client()).call(Host, 'POST', hostPath), output);
}

export async function removeHost(id: string, output: OutputMode): Promise<string> {
  const hostPath = path(id);
  await (await client()).call(NoContent, 'DELETE', hostPath);
  return output === 'json' ? `${JSON.stringify({ removed: id })}\n` : `removed ${id}\n`;
}

/**
 * `orch host drain <id>`: cordons the host and moves its running environments to other hosts by
 * live snapshot; follows the moves until each is done or rolled back (unless --detach) and prints
 * each one's downtime, then what could not move and why.
 */
export async function drainHost(id: string, opts: { detach?: boolean }, output: OutputMode): Promise<string> {
  const hostPath = `${path(id)}?action=drain`;
  const api = await client();
  const drain = await api.call(HostDrain, 'POST', hostPath);
  const ids = new Set(drain.moves.map((m) => m.id));
  let moves = drain.moves;
  while (!opts.detach && moves.some((m) => m.state !== 'done' && m.state !== 'rolled_back')) {
    await new Promise((r) => setTimeout(r, 500));
    const all = await api.call(MoveList, 'GET', `/v1/moves?host_id=${encodeURIComponent(id)}`);
    moves = all.moves.filter((m) => ids.has(m.id));
  }
  if (output === 'json') return `${JSON.stringify({ ...drain, moves }, null, 2)}\n`;
  const out = [`host ${id} cordoned`];
  if (moves.length > 0)
    out.push(
      table(
        ['ENV', 'FROM', 'TO', 'STATE', 'DOWNTIME', 'REASON'],
        moves.map((m) => [
          m.environment_id,
          m.from_host_id,
          m.to_host_id,
          m.state,
          m.downtime_ms === null ? '-' : `${m.downtime_ms} ms`,
          m.reason ?? '',
        ]),
      ).trimEnd(),
    );
  else out.push('no running environment to move');
  if (drain.unmovable.length > 0)
    out.push(
      `not moved:\n${table(
        ['ENV', 'STATE', 'WHY'],
        drain.unmovable.map((u) => [u.environment_id, u.state, u.reason]),
      ).trimEnd()}`,
    );
  return `${out.join('\n')}\n`;
}
