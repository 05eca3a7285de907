import { readFile, readlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';

/**
 * Binding PCI functions to `vfio-pci` and back, through sysfs (kernel documentation,
 * "VFIO - Virtual Function I/O"): set `driver_override`, unbind from the current driver, ask the
 * kernel to probe again; at release clear the override, unbind from vfio-pci and probe again, so
 * the host driver (`nvidia`) takes the device back. Every write is checked by reading the bound
 * driver afterwards; a function that did not move is an error naming it.
 */

async function driverOf(sysfs: string, address: string): Promise<string | null> {
  try {
    return basename(await readlink(join(sysfs, 'bus/pci/devices', address, 'driver')));
  } catch {
    return null;
  }
}

/** PCI bridges in a group stay with the host (VFIO allows them unbound or on pcieport). */
export async function isBridge(sysfs: string, address: string): Promise<boolean> {
  try {
    return (await readFile(join(sysfs, 'bus/pci/devices', address, 'class'), 'utf8'))
      .trim()
      .startsWith('0x0604');
  } catch {
    return false;
  }
}

/** A PCI function did not bind or unbind as asked. */
export class VfioError extends Error {
  override readonly name = 'VfioError';
}

/** Binds `address` to vfio-pci (a no-op when it is already); returns the driver it had. */
export async function bindVfio(sysfs: string, address: string): Promise<string | null> {
  const dev = join(sysfs, 'bus/pci/devices', address);
  const before = await driverOf(sysfs, address);
  if (before === 'vfio-pci') return before;
  try {
    await writeFile(join(dev, 'driver_override'), 'vfio-pci\n');
    if (before !== null) await writeFile(join(dev, 'driver', 'unbind'), `${address}\n`);
    await writeFile(join(sysfs, 'bus/pci/drivers_probe'), `${address}\n`);
  } catch (err) {
    throw new VfioError(`cannot bind ${address} to vfio-pci: ${(err as Error).message}`);
  }
  const after = await driverOf(sysfs, address);
  if (after !== 'vfio-pci')
    throw new VfioError(
      `${address} did not bind to vfio-pci (its driver is ${after ?? 'none'}; is the vfio-pci module loaded?)`,
    );
  return before;
}

/** Gives `address` back to the host: clears the override, unbinds it from vfio-pci and probes again. */
export async function unbindVfio(sysfs: string, address: string): Promise<void> {
  const dev = join(sysfs, 'bus/pci/devices', address);
  try {
    await writeFile(join(dev, 'driver_override'), '\n');
    if ((await driverOf(sysfs, address)) === 'vfio-pci')
      await writeFile(join(sysfs, 'bus/pci/drivers/vfio-pci/unbind'), `${address}\n`);
    await writeFile(join(sysfs, 'bus/pci/drivers_probe'), `${address}\n`);
  } catch (err) {
    throw new VfioError(`cannot give ${address} back to the host: ${(err as Error).message}`);
  }
}
