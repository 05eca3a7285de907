import { cpSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Test doubles of a GPU host without a GPU: a fake `nvidia-smi` (a shell script answering from the
 * fixture files of `fixtures/nvidia-smi/<case>/`, written from NVIDIA's documented output formats)
 * and a fake sysfs tree (PCI devices with vendor, class, bound driver and IOMMU group).
 */

/** The directory holding the fake `nvidia-smi`: put it first on PATH. */
export const SMI_BIN_DIR = fileURLToPath(new URL('./fixtures/nvidia-smi/', import.meta.url));

/** The fixture cases: what a host's nvidia-smi answers. */
export const SMI_CASES = ['h100', 'h100-mig', 'h200', 'l40s', 'no-driver', 'mismatch', 'garbage'] as const;
export type SmiCase = (typeof SMI_CASES)[number];

/** Makes `dir` (the fake's `FAKE_NVIDIA_SMI_DIR`) answer as fixture `name`. */
export function useSmiCase(dir: string, name: SmiCase): void {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  cpSync(join(SMI_BIN_DIR, name), dir, { recursive: true });
}

/** One PCI function of the fake tree. */
export interface FakePciFunction {
  readonly address: string;
  readonly vendor?: string;
  /** Default `0x030200` (3D controller). */
  readonly pciClass?: string;
  readonly driver?: string | null;
  readonly group?: number | null;
}

/**
 * Writes a sysfs tree under `root`: `bus/pci/devices/<addr>/{vendor,class,driver_override}`,
 * `driver` and `iommu_group` links, `kernel/iommu_groups/<n>/devices/<addr>`, the driver
 * directories (`bus/pci/drivers/<name>/{bind,unbind}`) and `bus/pci/drivers_probe`. `vfio` adds the
 * vfio-pci driver directory (the module loaded).
 */
export function fakeSysfs(
  root: string,
  fns: readonly FakePciFunction[],
  opts: { vfio?: boolean } = {},
): string {
  rmSync(root, { recursive: true, force: true });
  const drivers = new Set(fns.map((f) => f.driver).filter((d): d is string => !!d));
  if (opts.vfio) drivers.add('vfio-pci');
  mkdirSync(join(root, 'bus/pci/devices'), { recursive: true });
  mkdirSync(join(root, 'kernel'), { recursive: true });
  writeFileSync(join(root, 'bus/pci/drivers_probe'), '');
  for (const d of drivers) {
    mkdirSync(join(root, 'bus/pci/drivers', d), { recursive: true });
    writeFileSync(join(root, 'bus/pci/drivers', d, 'bind'), '');
    writeFileSync(join(root, 'bus/pci/drivers', d, 'unbind'), '');
  }
  for (const f of fns) {
    const dev = join(root, 'bus/pci/devices', f.address);
    mkdirSync(dev, { recursive: true });
    writeFileSync(join(dev, 'vendor'), `${f.vendor ?? '0x10de'}\n`);
    writeFileSync(join(dev, 'class'), `${f.pciClass ?? '0x030200'}\n`);
    writeFileSync(join(dev, 'driver_override'), '(null)\n');
    if (f.driver) symlinkSync(`../../../../bus/pci/drivers/${f.driver}`, join(dev, 'driver'));
    if (f.group !== undefined && f.group !== null) {
      const g = join(root, 'kernel/iommu_groups', String(f.group), 'devices');
      mkdirSync(g, { recursive: true });
      symlinkSync(`../../../../bus/pci/devices/${f.address}`, join(g, f.address));
      symlinkSync(`../../../../kernel/iommu_groups/${f.group}`, join(dev, 'iommu_group'));
    }
  }
  return root;
}

/** Re-points `address`'s driver link, as the kernel does after a bind or unbind (the test's kernel). */
export function setDriver(root: string, address: string, driver: string | null): void {
  const link = join(root, 'bus/pci/devices', address, 'driver');
  rmSync(link, { force: true });
  if (driver) symlinkSync(`../../../../bus/pci/drivers/${driver}`, link);
}

/** Names under a directory (for assertions on the fake tree). */
export function list(dir: string): string[] {
  return readdirSync(dir).sort();
}
