import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type AgentGpu,
  type AgentGpuDevice,
  type AgentGpuStatus,
  MIG_VM_REFUSAL,
  migProfilesOffered,
} from '@orch/protocol';
import type { Logger } from 'pino';
import { AgentError } from '../errors.js';
import { type DetectOptions, detectGpus, type GpuDetection } from './detect.js';
import type { PassthroughGpu } from './passthrough-argv.js';
import { bindVfio, isBridge, unbindVfio } from './vfio.js';

/** What one VM holds: the devices as detected when it took them, and the PCI functions bound to vfio-pci. */
interface Hold {
  readonly devices: AgentGpuDevice[];
  readonly gpus: PassthroughGpu[];
}

/** The GPU part of `GET /v1/info`. */
export interface GpuInfo {
  readonly gpus: AgentGpu[];
  readonly gpu_devices: AgentGpuDevice[];
  readonly gpu_status: AgentGpuStatus;
}

/**
 * The GPUs of a GPU host: detection at every `info()` (each health check of orchd asks; concurrent
 * asks share one run), and the whole GPUs VMs hold. A hold is written to `<data dir>/gpu-holds.json`
 * before any device is bound, so an agent restart knows what is bound for whom: {@link recover}
 * gives back the devices of VMs that did not survive and keeps those of re-adopted ones.
 *
 * While a VM holds a GPU it is bound to `vfio-pci`, and nvidia-smi no longer lists it; `info()`
 * reports it from the hold (as detected when taken) with `held_by`.
 */
export class GpuManager {
  private holds = new Map<string, Hold>();
  private running: Promise<GpuDetection> | undefined;
  /** Serializes reserve and release (two creates never take the same GPU). */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly opts: DetectOptions & {
      readonly dataDir: string;
      readonly logger: Logger;
      /** How PCI functions move to vfio-pci and back (sysfs writes, `vfio.ts`; a test stands in for the kernel). */
      readonly vfio?: { bind: typeof bindVfio; unbind: typeof unbindVfio };
    },
  ) {}

  private get vfio() {
    return this.opts.vfio ?? { bind: bindVfio, unbind: unbindVfio };
  }

  private get file(): string {
    return join(this.opts.dataDir, 'gpu-holds.json');
  }

  /** Runs detection now (or joins the run under way). */
  detect(): Promise<GpuDetection> {
    this.running ??= detectGpus(this.opts).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Detection merged with the holds, and the per-model summary orchd places by. */
  async info(): Promise<GpuInfo> {
    const found = await this.detect();
    const heldBy = new Map<string, string>();
    for (const [vm, hold] of this.holds) for (const d of hold.devices) heldBy.set(d.pci_address, vm);
    const devices = found.devices.map((d) => ({ ...d, held_by: heldBy.get(d.pci_address) ?? null }));
    for (const [vm, hold] of this.holds)
      for (const d of hold.devices)
        if (!devices.some((x) => x.pci_address === d.pci_address))
          devices.push({ ...d, driver: 'vfio-pci', held_by: vm });
    devices.sort((a, b) => a.pci_address.localeCompare(b.pci_address));
    return { gpus: summarize(devices), gpu_devices: devices, gpu_status: found.status };
  }

  /**
   * Takes `count` whole GPUs of `model` for VM `vmId` and binds their IOMMU groups to vfio-pci.
   * Refused, naming why: a MIG profile (never for a VM), passthrough impossible here (what is
   * missing), detection failing, too few free GPUs of that model.
   */
  reserve(
    vmId: string,
    gpu: { model: string; count: number; mig?: string | undefined },
  ): Promise<PassthroughGpu[]> {
    const run = this.queue.then(() => this.take(vmId, gpu));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async take(vmId: string, gpu: { model: string; count: number; mig?: string | undefined }) {
    if (gpu.mig !== undefined)
      throw AgentError.invalid(`spec.gpu.mig ${gpu.mig}: ${MIG_VM_REFUSAL}`, {
        field: 'spec.gpu.mig',
        reason: 'mig_not_passable',
      });
    const { gpu_devices, gpu_status } = await this.info();
    if (!gpu_status.passthrough.available)
      throw AgentError.invalid(
        `this host detects GPUs but cannot pass them to a VM: missing ${gpu_status.passthrough.missing.join('; ')}`,
        { field: 'spec.gpu', reason: 'no_passthrough', missing: gpu_status.passthrough.missing },
      );
    if (gpu_status.state !== 'ok')
      throw AgentError.unavailable(`GPU detection failed: ${gpu_status.detail}`, { reason: 'gpu_detection' });
    const free = gpu_devices.filter(
      (d) =>
        d.model === gpu.model && d.mig_mode !== 'enabled' && d.iommu_group !== null && d.held_by === null,
    );
    if (free.length < gpu.count)
      throw AgentError.conflict(`${free.length} of ${gpu.count} ${gpu.model} GPUs free on this host`, {
        reason: 'no_free_gpu',
        free: free.length,
      });
    const devices = free.slice(0, gpu.count);
    const gpus: PassthroughGpu[] = [];
    for (const d of devices) {
      const members = d.iommu_group_devices.length > 0 ? d.iommu_group_devices : [d.pci_address];
      const fns: string[] = [];
      for (const m of members) if (!(await isBridge(this.opts.sysfs, m))) fns.push(m);
      // The GPU first: it becomes function 0 of its guest slot.
      gpus.push({ functions: [d.pci_address, ...fns.filter((f) => f !== d.pci_address)] });
    }
    this.holds.set(vmId, { devices, gpus });
    await this.save();
    try {
      for (const g of gpus) for (const fn of g.functions) await this.vfio.bind(this.opts.sysfs, fn);
    } catch (err) {
      await this.giveBack(vmId);
      throw AgentError.unavailable((err as Error).message, { reason: 'vfio_bind_failed' });
    }
    this.opts.logger.info({ vm: vmId, gpus: devices.map((d) => d.pci_address) }, 'GPUs bound to vfio-pci');
    return gpus;
  }

  /** Gives VM `vmId`'s GPUs back to the host driver (at its stop or delete); a no-op without a hold. */
  release(vmId: string): Promise<void> {
    const run = this.queue.then(() => this.giveBack(vmId));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async giveBack(vmId: string): Promise<void> {
    const hold = this.holds.get(vmId);
    if (!hold) return;
    for (const g of hold.gpus)
      for (const fn of g.functions)
        await this.vfio
          .unbind(this.opts.sysfs, fn)
          .catch((err: unknown) =>
            this.opts.logger.warn(
              { vm: vmId, device: fn, err: (err as Error).message },
              'could not unbind from vfio-pci',
            ),
          );
    this.holds.delete(vmId);
    await this.save();
    this.opts.logger.info({ vm: vmId }, 'GPUs released');
  }

  /** The PCI functions VM `vmId` holds (for its QEMU argv), or undefined. */
  heldBy(vmId: string): PassthroughGpu[] | undefined {
    return this.holds.get(vmId)?.gpus;
  }

  /**
   * At agent start: reads the holds, keeps those of VMs that are alive again (`alive`) and gives
   * back the GPUs of every other (its VM is gone, stopped or in error).
   */
  async recover(alive: (vmId: string) => boolean): Promise<void> {
    try {
      const raw = JSON.parse(await readFile(this.file, 'utf8')) as Record<string, Hold>;
      this.holds = new Map(Object.entries(raw));
    } catch {
      this.holds = new Map();
    }
    for (const vmId of [...this.holds.keys()]) {
      if (alive(vmId)) continue;
      this.opts.logger.info(
        { vm: vmId },
        'releasing the GPUs of a VM that did not survive the agent restart',
      );
      await this.giveBack(vmId);
    }
  }

  private async save(): Promise<void> {
    const tmp = `${this.file}.tmp`;
    await writeFile(tmp, JSON.stringify(Object.fromEntries(this.holds)), { mode: 0o600 });
    await rename(tmp, this.file);
  }
}

/** Per catalog model: whole GPUs that can go to a VM, how many no VM holds, and the MIG profiles offered. */
export function summarize(devices: readonly AgentGpuDevice[]): AgentGpu[] {
  const models = [...new Set(devices.map((d) => d.model).filter((m): m is string => m !== null))].sort();
  return models.map((model) => {
    const whole = devices.filter(
      (d) => d.model === model && d.mig_mode !== 'enabled' && d.iommu_group !== null,
    );
    return {
      model,
      count: whole.length,
      free: whole.filter((d) => d.held_by === null).length,
      mig_profiles: migProfilesOffered(devices, model),
    };
  });
}
