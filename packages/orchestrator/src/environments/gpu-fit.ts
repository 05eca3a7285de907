import { gpuKey, gpuSupply, type Host, MIG_VM_REFUSAL, migProfilesOffered } from '@orch/protocol';

/**
 * GPU placement, as pure functions over what a host's agent reported (`gpu_devices`,
 * `gpu_status`: the vocabulary of `@orch/protocol`'s `gpu.ts`) and the GPUs its active
 * environments hold (counted per {@link gpuKey} by `EnvironmentsRepo.usage`). The scheduler calls
 * {@link gpuNeverFits} while it qualifies hosts and {@link gpuNotNow} while it picks one.
 *
 * A whole-GPU request fits a host with that many GPUs of the model that are not in MIG mode, are
 * in an IOMMU group and no environment holds, on a host that can pass GPUs through (KVM, IOMMU,
 * vfio-pci). A MIG request is matched against the MIG instances (with a compute instance) of
 * MIG-enabled GPUs of the model, and then refused: a MIG slice cannot go to a VM
 * ({@link MIG_VM_REFUSAL}).
 */

/** A GPU request of `spec.gpu`. */
export interface GpuRequest {
  readonly model: string;
  readonly count: number;
  readonly mig?: string | undefined;
}

/** Whether the devices fit: yes, never (the host lacks them), or not now (they are held or detection failed). */
export type GpuFit =
  | { readonly ok: true }
  | { readonly ok: false; readonly when: 'never' | 'now'; readonly reason: string };

/** Reasons name no host: the scheduler prefixes the host id. */
type GpuFacts = Pick<Host, 'gpu_devices' | 'gpu_status'>;

const never = (reason: string): GpuFit => ({ ok: false, when: 'never', reason });
const notNow = (reason: string): GpuFit => ({ ok: false, when: 'now', reason });

/** What a host's GPUs are, in a few words (`2x h100, 1x L40S`). */
function inventory(h: GpuFacts): string {
  const counts = new Map<string, number>();
  for (const d of h.gpu_devices) counts.set(d.model ?? d.name, (counts.get(d.model ?? d.name) ?? 0) + 1);
  return counts.size === 0 ? 'no GPU' : [...counts].map(([m, n]) => `${n}x ${m}`).join(', ');
}

/**
 * Whether `gpu` fits host `h` given `held` (devices its environments hold, per {@link gpuKey}).
 * Device matching only: whether the host can pass them to a VM is {@link passthroughRefusal}.
 */
export function gpuFit(h: GpuFacts, held: Readonly<Record<string, number>>, gpu: GpuRequest): GpuFit {
  const s = h.gpu_status;
  if (s === null) return never(`its agent reports no GPU detection (an orch-agent without it)`);
  if (s.state === 'no_gpu') return never(`no GPU (${s.detail ?? 'none detected'})`);
  if (s.state !== 'ok') return notNow(`GPU detection failed: ${s.detail ?? s.state}`);
  const ofModel = h.gpu_devices.filter((d) => d.model === gpu.model);
  if (ofModel.length === 0) return never(`no ${gpu.model} GPU (it has ${inventory(h)})`);
  const key = gpuKey(gpu);
  const supply = gpuSupply(h.gpu_devices).get(key) ?? 0;
  const free = supply - (held[key] ?? 0);
  if (gpu.mig !== undefined) {
    const offered = migProfilesOffered(h.gpu_devices, gpu.model);
    if (!offered.includes(gpu.mig))
      return never(
        `MIG profile ${gpu.mig} is not offered by its ${gpu.model} GPUs (${offered.length > 0 ? `offered: ${offered.join(', ')}` : 'MIG mode is off'})`,
      );
    if (supply < gpu.count)
      return never(`no ${gpu.model} MIG ${gpu.mig} instance is created (nvidia-smi mig -cgi ... -C)`);
    if (free < gpu.count)
      return notNow(`${Math.max(free, 0)} of ${gpu.count} ${gpu.model} MIG ${gpu.mig} instances free`);
    return { ok: true };
  }
  if (supply < gpu.count) {
    const mig = ofModel.filter((d) => d.mig_mode === 'enabled').length;
    const noGroup = ofModel.filter((d) => d.mig_mode !== 'enabled' && d.iommu_group === null).length;
    const why = [mig > 0 ? `${mig} in MIG mode` : '', noGroup > 0 ? `${noGroup} without an IOMMU group` : '']
      .filter(Boolean)
      .join(', ');
    return never(
      `${supply} whole ${gpu.model} GPU(s) can be passed through, ${gpu.count} asked${why ? ` (${why})` : ''}`,
    );
  }
  if (free < gpu.count) return notNow(`${Math.max(free, 0)} of ${gpu.count} ${gpu.model} GPUs free`);
  return { ok: true };
}

/** Why host `h` cannot give `gpu` to a VM at all (MIG, or KVM/IOMMU/vfio-pci missing), or undefined. */
export function passthroughRefusal(h: GpuFacts, gpu: GpuRequest): string | undefined {
  if (gpu.mig !== undefined) return `${MIG_VM_REFUSAL}`;
  const p = h.gpu_status?.passthrough;
  if (p && !p.available) return `detects GPUs but cannot pass them to a VM: missing ${p.missing.join('; ')}`;
  return undefined;
}

/** The scheduler's "could ever fit" check: why `gpu` never fits host `h`, or undefined. */
export function gpuNeverFits(h: GpuFacts, gpu: GpuRequest): string | undefined {
  const fit = gpuFit(h, {}, gpu);
  if (!fit.ok && fit.when === 'never') return fit.reason;
  return passthroughRefusal(h, gpu);
}

/** The scheduler's "fits now" check: why `gpu` does not fit host `h` now, or undefined. */
export function gpuNotNow(
  h: GpuFacts,
  held: Readonly<Record<string, number>>,
  gpu: GpuRequest,
): string | undefined {
  const fit = gpuFit(h, held, gpu);
  return fit.ok ? undefined : fit.reason;
}
