/**
 * The QEMU argv of a VM with whole GPUs passed through by VFIO, made from the microVM argv
 * (`vm/qemu-argv.ts`) by one pure function, so the two evolve apart:
 *
 * - `-M microvm` becomes `-M q35`: VFIO devices are PCI devices, and microvm has no PCI bus. The
 *   guest's virtio devices become their PCI forms (`virtio-blk-device` -> `virtio-blk-pci`, ...),
 *   same order, same ids, so the guest sees the same disks, NIC and ports (its initramfs loads
 *   `virtio_pci`).
 * - Each GPU gets a PCIe root port of its own, and every function of its IOMMU group (a GPU and
 *   its audio function, for example) goes behind it as one multifunction device, function 0 first:
 *   VFIO hands a group to one guest whole, or not at all.
 * - The 64-bit PCI hole is made large enough for data-centre GPUs' BARs (an H100's BAR1 is 128 GiB;
 *   QEMU's default hole is 32 GiB and the guest could not map it), and the guest CPU gets the
 *   host's physical address bits (`host-phys-bits=on`) so that the hole is addressable: QEMU refuses
 *   to start when it is not (measured under TCG's 40 bits: "Address space limit 0xffffffffff <
 *   0x2ffffffffff phys-bits too low (40)"; data-centre hosts have 46 bits or more).
 *
 * Only under KVM: a GPU cannot be passed to a TCG guest (VFIO maps guest memory for the device's
 * DMA through the host IOMMU, which needs KVM's memory slots). The caller refuses earlier; this
 * function throws if asked anyway.
 */

/** One GPU to pass through: the PCI functions of its IOMMU group that go to the guest, the GPU first. */
export interface PassthroughGpu {
  readonly functions: readonly string[];
}

/** Size of the 64-bit PCI hole of a VM with GPUs. */
export const PCI_HOLE64 = '2048G';

const PCI_ADDRESS = /^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/;

/**
 * The microVM argv as a q35 machine: `-M q35` and the virtio devices in their PCI forms (same
 * order, same ids). Any accelerator (the VM test boots it under TCG to show that the guest finds its
 * disk, console and channels on PCI).
 */
export function toQ35(argv: readonly string[]): string[] {
  const machine = argv.indexOf('-M');
  if (machine < 0 || argv[machine + 1] !== 'microvm') throw new Error('expected a microvm argv (-M microvm)');
  const out = argv.map((arg, i) => {
    if (i === machine + 1) return 'q35';
    if (argv[i - 1] === '-device')
      return arg.replace(/^virtio-(blk|net|serial|rng)-device\b/, 'virtio-$1-pci');
    return arg;
  });
  return out;
}

/** `args` inserted before QMP and `-incoming`, which stay last. */
function beforeQmp(argv: string[], args: readonly string[]): string[] {
  const qmp = argv.indexOf('-qmp');
  argv.splice(qmp < 0 ? argv.length : qmp, 0, ...args);
  return argv;
}

/** `argv` (of `qemuArgv`) as q35 ({@link toQ35}) with `gpus` passed through, under KVM only. */
export function withGpuPassthrough(argv: readonly string[], gpus: readonly PassthroughGpu[]): string[] {
  const accel = argv[argv.indexOf('-accel') + 1];
  if (accel !== 'kvm')
    throw new Error(`GPU passthrough needs KVM, and this VM runs under ${accel ?? 'no accelerator'}`);
  const q35 = toQ35(argv).map((a, i, all) =>
    all[i - 1] === '-cpu' && a === 'host' ? 'host,host-phys-bits=on' : a,
  );
  const devices: string[] = ['-global', `q35-pcihost.pci-hole64-size=${PCI_HOLE64}`];
  gpus.forEach((gpu, i) => {
    if (gpu.functions.length === 0 || gpu.functions.length > 8)
      throw new Error(`GPU ${i}: ${gpu.functions.length} PCI functions (1 to 8 fit one slot)`);
    const port = `gpu${i}port`;
    devices.push('-device', `pcie-root-port,id=${port},bus=pcie.0,chassis=${i + 1},slot=${i + 1}`);
    gpu.functions.forEach((fn, f) => {
      if (!PCI_ADDRESS.test(fn)) throw new Error(`${JSON.stringify(fn)} is not a PCI address`);
      const multi = f === 0 && gpu.functions.length > 1 ? ',multifunction=on' : '';
      devices.push('-device', `vfio-pci,host=${fn},id=gpu${i}f${f},bus=${port},addr=0x0.${f}${multi}`);
    });
  });
  return beforeQmp(q35, devices);
}
