import { checkAgentUrl, type Host } from '@orch/protocol';
import { UsageError } from '../errors.js';
import { table } from '../table.js';
import { client } from './client.js';
import type { OutputMode } from './preview.js';

const path = (id: string) => `/v1/hosts/${encodeURIComponent(id)}`;
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

/** `orch host register --url U [--kind] [--token] [--id] [--label k=v]`. The URL is checked here too, before anything is sent. */
export async function registerHost(
  opts: { url: string; kind: string; token?: string; id?: string; label?: string[] },
  output: OutputMode,
): Promise<string> {
  const checked = checkAgentUrl(opts.url);
  if (!checked.ok) throw new UsageError(checked.reason);
  const pairs = (opts.label ?? []).map((l) => {
    const [k, ...v] = l.split('=');
    if (!k || v.length === 0) throw new UsageError(`--label ${JSON.stringify(l)} must look like key=value`);
    return [k, v.join('=')] as const;
  });
  // fromEntries defines own properties: a label named `__proto__` is a label.
  const labels: Record<string, string> = Object.fromEntries(pairs);
  const host = await (await client()).call<Host>('POST', '/v1/hosts', {
    kind: opts.kind,
    agent_url: checked.url,
    labels,
    ...(opts.token ? { agent_token: opts.token } : {}),
    ...(opts.id ? { id: opts.id } : {}),
  });
  return show(host, output);
}

export async function listHosts(output: OutputMode): Promise<string> {
  const { hosts } = await (await client()).call<{ hosts: Host[] }>('GET', '/v1/hosts');
  if (output === 'json') return `${JSON.stringify({ hosts }, null, 2)}\n`;
  if (hosts.length === 0)
    return 'no hosts: register one with `orch host register --url http://<agent>:9090`\n';
  return hostRows(hosts);
}

export async function getHost(id: string, output: OutputMode): Promise<string> {
  return show(await (await client()).call<Host>('GET', path(id)), output);
}

/** `orch host images <id>`: the images the host boots, with size, digest and source. */
export async function hostImages(id: string, output: OutputMode): Promise<string> {
  const host = await (await client()).call<Host>('GET', path(id));
  const images = host.image_details ?? [];
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
  return show(await (await client()).call<Host>('POST', `${path(id)}?action=${action}`), output);
}

export async function removeHost(id: string, output: OutputMode): Promise<string> {
  await (await client()).call('DELETE', path(id));
  return output === 'json' ? `${JSON.stringify({ removed: id })}\n` : `removed ${id}\n`;
}
