import { access, readdir, readFile, readlink } from 'node:fs/promises';
import { basename, join } from 'node:path';

/**
 * PCI facts from sysfs, under a root the agent is configured with (`AGENT_SYSFS_ROOT`, `/sys` by
 * default; tests point it at a fixture tree). Read-only here; binding is `vfio.ts`.
 */

/** NVIDIA's PCI vendor id. */
export const NVIDIA_VENDOR = '0x10de';

/** One PCI function as sysfs describes it. */
export interface PciFunction {
  /** `0000:18:00.0`. */
  readonly address: string;
  readonly vendor: string;
  /** `0x030200` (3D controller), `0x030000` (VGA), `0x040300` (audio)... */
  readonly pciClass: string;
  /** Bound driver (`nvidia`, `vfio-pci`) or null. */
  readonly driver: string | null;
  readonly iommuGroup: number | null;
}

const ADDRESS = /^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/;

async function readTrim(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch {
    return undefined;
  }
}

async function linkName(path: string): Promise<string | null> {
  try {
    return basename(await readlink(path));
  } catch {
    return null;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** The PCI function at `address`, or undefined when sysfs has no such device. */
export async function pciFunction(sysfs: string, address: string): Promise<PciFunction | undefined> {
  if (!ADDRESS.test(address)) return undefined;
  const dir = join(sysfs, 'bus/pci/devices', address);
  const vendor = await readTrim(join(dir, 'vendor'));
  if (vendor === undefined) return undefined;
  const group = await linkName(join(dir, 'iommu_group'));
  return {
    address,
    vendor,
    pciClass: (await readTrim(join(dir, 'class'))) ?? '',
    driver: await linkName(join(dir, 'driver')),
    iommuGroup: group !== null && /^\d+$/.test(group) ? Number(group) : null,
  };
}

/** NVIDIA display and 3D controllers (class 0x03xxxx) on the PCI bus: the GPUs, whatever driver holds them. */
export async function nvidiaGpus(sysfs: string): Promise<PciFunction[]> {
  let names: string[];
  try {
    names = await readdir(join(sysfs, 'bus/pci/devices'));
  } catch {
    return [];
  }
  const out: PciFunction[] = [];
  for (const name of names.sort()) {
    const fn = await pciFunction(sysfs, name);
    if (fn && fn.vendor.toLowerCase() === NVIDIA_VENDOR && fn.pciClass.startsWith('0x03')) out.push(fn);
  }
  return out;
}

/** Every PCI function in IOMMU group `group` (VFIO passes a group whole). */
export async function iommuGroupDevices(sysfs: string, group: number): Promise<string[]> {
  try {
    return (await readdir(join(sysfs, 'kernel/iommu_groups', String(group), 'devices')))
      .filter((n) => ADDRESS.test(n))
      .sort();
  } catch {
    return [];
  }
}

/** Whether the host has an active IOMMU (groups exist). */
export async function hasIommu(sysfs: string): Promise<boolean> {
  try {
    return (await readdir(join(sysfs, 'kernel/iommu_groups'))).length > 0;
  } catch {
    return false;
  }
}

/** Whether the `vfio-pci` driver is loaded (its sysfs driver directory exists). */
export function hasVfioPci(sysfs: string): Promise<boolean> {
  return exists(join(sysfs, 'bus/pci/drivers/vfio-pci'));
}
