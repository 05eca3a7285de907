import type { Host, ManifestService, VmSpec } from '@orch/protocol';
import type { PlacementFailure } from '../metrics.js';
import type { HostUsage } from '../store/environments-repo.js';
import { gpuNeverFits, gpuNotNow } from './gpu-fit.js';

/** Where an environment must or may go. */
export interface PlacementRequest {
  readonly spec: VmSpec;
  /** Snapshots live on the host that took them: a restore or a seed must run there. */
  readonly onHost?: string;
  /** The manifest's services: the chosen host must have every service's image. */
  readonly services?: readonly ManifestService[];
}

export type Placement =
  | { readonly ok: true; readonly host: Host }
  | {
      readonly ok: false;
      readonly code: 'invalid_argument' | 'unavailable';
      readonly message: string;
      /** Why, as a bounded metric label. */
      readonly reason: PlacementFailure;
    };

const EMPTY: HostUsage = { cpus: 0, ram_mb: 0, disk_gb: 0, gpus: {} };

/**
 * Picks a host for an environment. A host qualifies when it has the right kind (a GPU request needs
 * a gpu host), the image, the GPUs (`gpu-fit.ts`: model, MIG profile, passthrough), and enough total capacity ("could ever
 * fit"); it is eligible when it is also active (not cordoned), healthy, and has the cpus, RAM, disk
 * and GPUs free after what its active environments reserve ("fits now"). Among eligible hosts the
 * one left with the largest free share of its scarcest resource wins (spreads load); ties go to
 * the smaller id, so placement is deterministic.
 *
 * No host could ever fit: `invalid_argument`, saying what is missing. Some could, none now:
 * `unavailable`, saying why each candidate is out.
 */
export function place(
  hosts: readonly Host[],
  usage: ReadonlyMap<string, HostUsage>,
  req: PlacementRequest,
): Placement {
  const { spec } = req;
  const kind = spec.gpu ? 'gpu' : 'microvm';
  let pool = hosts.filter((h) => h.kind === kind);
  if (req.onHost !== undefined) pool = pool.filter((h) => h.id === req.onHost);
  if (pool.length === 0) {
    return {
      ok: false,
      code: 'invalid_argument',
      reason: 'no_host_registered',
      message:
        req.onHost !== undefined
          ? `host ${req.onHost} (where the snapshot is) is not a registered ${kind} host`
          : `no ${kind} host is registered`,
    };
  }
  // A service image that no host has: say which image and which service, before anything else.
  for (const svc of req.services ?? []) {
    if (pool.some((h) => h.images.includes(svc.imageName))) continue;
    const alias = svc.imageName === svc.image ? '' : ` (image name ${svc.imageName})`;
    return {
      ok: false,
      code: 'invalid_argument',
      reason: 'never_fits',
      message: `service "${svc.name}": image "${svc.image}"${alias} is on no ${kind} host${req.onHost !== undefined ? ` (${req.onHost})` : ''}`,
    };
  }
  const missing = new Set<string>();
  const qualified = pool.filter((h) => {
    const lacks = couldNeverFit(h, spec, req.services ?? []);
    for (const m of lacks) missing.add(m);
    return lacks.length === 0;
  });
  if (qualified.length === 0) {
    return {
      ok: false,
      code: 'invalid_argument',
      reason: 'never_fits',
      message: `no registered ${kind} host could ever run this: ${[...missing].join('; ')}`,
    };
  }
  const reasons: string[] = [];
  let best: { host: Host; score: number } | undefined;
  for (const h of qualified) {
    const u = usage.get(h.id) ?? EMPTY;
    const why = fitsNow(h, u, spec);
    if (why) {
      reasons.push(`${h.id}: ${why}`);
      continue;
    }
    const score = Math.min(
      (h.capacity.cpus - u.cpus - spec.cpus) / h.capacity.cpus,
      (h.capacity.ram_mb - u.ram_mb - spec.ram_mb) / h.capacity.ram_mb,
      (h.capacity.disk_gb - u.disk_gb - spec.storage_gb) / h.capacity.disk_gb,
    );
    if (!best || score > best.score || (score === best.score && h.id < best.host.id))
      best = { host: h, score };
  }
  if (best) return { ok: true, host: best.host };
  return {
    ok: false,
    code: 'unavailable',
    reason: 'no_capacity',
    message: `no host can take this environment now: ${reasons.join('; ')}`,
  };
}

function couldNeverFit(h: Host, spec: VmSpec, services: readonly ManifestService[]): string[] {
  const lacks: string[] = [];
  if (spec.image !== undefined && !h.images.includes(spec.image))
    lacks.push(`image "${spec.image}" is on no host`);
  const without = services
    .filter((s) => !h.images.includes(s.imageName))
    .map((s) => `${s.name} (${s.image})`);
  if (without.length > 0)
    lacks.push(`no host has the images of all services (${h.id} lacks ${without.join(', ')})`);
  if (h.capacity.cpus < spec.cpus) lacks.push(`${spec.cpus} cpus (largest host has fewer)`);
  if (h.capacity.ram_mb < spec.ram_mb) lacks.push(`${spec.ram_mb} MiB of RAM (largest host has less)`);
  if (h.capacity.disk_gb < spec.storage_gb)
    lacks.push(`${spec.storage_gb} GiB of disk (largest host has less)`);
  if (spec.gpu) {
    const why = gpuNeverFits(h, spec.gpu);
    if (why) lacks.push(`${h.id}: ${why}`);
  }
  return lacks;
}

/**
 * Why `spec` does not fit on host `h` now, given what its environments hold (`u`): cordoned, not
 * healthy, or the resource short (with what is free); undefined when it fits.
 */
export function fitsNow(h: Host, u: HostUsage, spec: VmSpec): string | undefined {
  if (h.state === 'cordoned') return 'cordoned';
  // The health check's own words (for example "refused the agent token: http 401") say why.
  if (h.health !== 'healthy') return `health ${h.health}${h.health_detail ? ` (${h.health_detail})` : ''}`;
  const free = {
    cpus: h.capacity.cpus - u.cpus,
    ram_mb: h.capacity.ram_mb - u.ram_mb,
    disk_gb: h.capacity.disk_gb - u.disk_gb,
  };
  if (free.cpus < spec.cpus) return `${free.cpus} of ${spec.cpus} cpus free`;
  if (free.ram_mb < spec.ram_mb) return `${free.ram_mb} of ${spec.ram_mb} MiB RAM free`;
  if (free.disk_gb < spec.storage_gb) return `${free.disk_gb} of ${spec.storage_gb} GiB disk free`;
  if (spec.gpu) return gpuNotNow(h, u.gpus, spec.gpu);
  return undefined;
}
