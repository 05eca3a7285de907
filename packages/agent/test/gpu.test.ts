import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeEach, describe, expect, test } from 'vitest';
import { detectGpus } from '../src/gpu/detect.js';
import { GpuManager } from '../src/gpu/gpu-manager.js';
import {
  parseList,
  parseMigComputeInstances,
  parseMigInstances,
  parseMigProfiles,
  parseQueryGpu,
} from '../src/gpu/nvidia-smi.js';
import { withGpuPassthrough } from '../src/gpu/passthrough-argv.js';
import { bindVfio, unbindVfio } from '../src/gpu/vfio.js';
import { qemuArgv } from '../src/vm/qemu-argv.js';
import { fakeSysfs, SMI_BIN_DIR, setDriver, useSmiCase } from './gpu-fixtures.js';

const dir = mkdtempSync(join(tmpdir(), 'orch-gpu-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const smiDir = join(dir, 'smi');
process.env.FAKE_NVIDIA_SMI_DIR = smiDir;
const nvidiaSmi = join(SMI_BIN_DIR, 'nvidia-smi');
const fixture = (name: string, file: string) => readFileSync(join(SMI_BIN_DIR, name, file), 'utf8');
const logger = pino({ level: 'silent' });

/** A host with one GPU at `address` in IOMMU group 12 with its audio function, bound to nvidia. */
function gpuHost(address: string, opts: { vfio?: boolean; iommu?: boolean } = {}): string {
  const audio = address.replace(/\.0$/, '.1');
  const group = opts.iommu === false ? null : 12;
  return fakeSysfs(
    join(dir, 'sys'),
    [
      { address, driver: 'nvidia', group },
      { address: audio, pciClass: '0x040300', driver: 'snd_hda_intel', group },
      {
        address: '0000:00:1f.0',
        vendor: '0x8086',
        pciClass: '0x060100',
        driver: null,
        group: opts.iommu === false ? null : 3,
      },
    ],
    { vfio: opts.vfio ?? true },
  );
}

describe('nvidia-smi output parsers (fixtures written from NVIDIA’s documented formats)', () => {
  test('--query-gpu csv,noheader,nounits: identity, memory, MIG mode, bus id in sysfs form', () => {
    expect(parseQueryGpu(fixture('h100', 'query.out'))).toEqual([
      {
        index: 0,
        uuid: 'GPU-4b6a1c2e-9f7d-4e3a-b1c5-7d2e8f9a0b11',
        name: 'NVIDIA H100 80GB HBM3',
        pciAddress: '0000:18:00.0',
        memoryMib: 81559,
        memoryUsedMib: 0,
        migMode: 'disabled',
        driverVersion: '550.54.15',
      },
    ]);
    expect(parseQueryGpu(fixture('l40s', 'query.out'))[0]).toMatchObject({
      migMode: 'unsupported',
      pciAddress: '0000:ca:00.0',
    });
    expect(parseQueryGpu(fixture('h100-mig', 'query.out'))[0]).toMatchObject({
      migMode: 'enabled',
      memoryUsedMib: 3451,
    });
  });

  test('a --query-gpu line of the wrong shape is refused, not guessed', () => {
    expect(() => parseQueryGpu(fixture('garbage', 'query.out'))).toThrow(/has 5 columns, not 8/);
    expect(() => parseQueryGpu('0, GPU-1, X, not-an-address, 1, 1, Disabled, 1\n')).toThrow(
      /not a PCI address/,
    );
    expect(() => parseQueryGpu('0, nonsense, X, 0000:01:00.0, 1, 1, Disabled, 1\n')).toThrow(
      /not a GPU UUID/,
    );
  });

  test('-L lists GPUs and their MIG devices', () => {
    const [gpu] = parseList(fixture('h100-mig', 'list.out'));
    expect(gpu).toMatchObject({ index: 0, name: 'NVIDIA H100 80GB HBM3' });
    expect(gpu?.mig).toEqual(Array(7).fill('1g.10gb'));
    expect(() => parseList('something else\n')).toThrow(/unexpected nvidia-smi -L line/);
  });

  test('mig -lgip / -lgi / -lci tables: profiles with free/total, seven 1g.10gb instances, each with a compute instance', () => {
    const profiles = parseMigProfiles(fixture('h100-mig', 'lgip.out')).get(0)!;
    expect(profiles.map((p) => p.profile)).toEqual([
      '1g.10gb',
      '1g.10gb+me',
      '1g.20gb',
      '2g.20gb',
      '3g.40gb',
      '4g.40gb',
      '7g.80gb',
    ]);
    expect(profiles[0]).toEqual({
      profile: '1g.10gb',
      profile_id: 19,
      creatable: 0,
      max: 7,
      memory_gb: 9.75,
    });
    const instances = parseMigInstances(fixture('h100-mig', 'lgi.out')).get(0)!;
    expect(instances.map((i) => i.gi)).toEqual([7, 8, 9, 10, 11, 12, 13]);
    expect(new Set(instances.map((i) => i.profile))).toEqual(new Set(['1g.10gb']));
    const computes = parseMigComputeInstances(fixture('h100-mig', 'lci.out'));
    expect([...computes.values()]).toEqual(Array(7).fill(1));
    expect(() => parseMigProfiles('Segmentation fault\n')).toThrow(/unexpected line/);
  });
});

describe('detection (fake nvidia-smi, fake sysfs)', () => {
  beforeEach(() => gpuHost('0000:18:00.0'));
  const detect = (accelerator = 'kvm') => detectGpus({ nvidiaSmi, sysfs: join(dir, 'sys'), accelerator });

  test('H100 80GB without MIG: model, memory, UUID, PCI address, driver, IOMMU group with its audio function', async () => {
    useSmiCase(smiDir, 'h100');
    const { devices, status } = await detect();
    expect(status).toMatchObject({ state: 'ok', detail: null, driver_version: '550.54.15' });
    expect(status.passthrough).toEqual({ available: true, missing: [] });
    expect(devices).toEqual([
      expect.objectContaining({
        model: 'h100',
        memory_mb: 81559,
        uuid: 'GPU-4b6a1c2e-9f7d-4e3a-b1c5-7d2e8f9a0b11',
        pci_address: '0000:18:00.0',
        mig_mode: 'disabled',
        driver: 'nvidia',
        iommu_group: 12,
        iommu_group_devices: ['0000:18:00.0', '0000:18:00.1'],
        mig_profiles: [],
        mig_instances: [],
      }),
    ]);
  });

  test('H100 with MIG on: seven 1g.10gb instances and the profiles it offers', async () => {
    gpuHost('0000:3b:00.0');
    useSmiCase(smiDir, 'h100-mig');
    const [gpu] = (await detect()).devices;
    expect(gpu).toMatchObject({ model: 'h100', mig_mode: 'enabled', pci_address: '0000:3b:00.0' });
    expect(gpu?.mig_instances).toHaveLength(7);
    expect(gpu?.mig_instances.every((i) => i.profile === '1g.10gb' && i.compute_instances === 1)).toBe(true);
    expect(gpu?.mig_profiles.find((p) => p.profile === '3g.40gb')).toMatchObject({ creatable: 0, max: 2 });
  });

  test('H200 and L40S are their catalog models; an L40S is not MIG-capable', async () => {
    gpuHost('0000:9a:00.0');
    useSmiCase(smiDir, 'h200');
    expect((await detect()).devices[0]).toMatchObject({
      model: 'h200',
      memory_mb: 143771,
      mig_mode: 'disabled',
    });
    gpuHost('0000:ca:00.0');
    useSmiCase(smiDir, 'l40s');
    expect((await detect()).devices[0]).toMatchObject({
      model: 'l40s',
      mig_mode: 'unsupported',
      iommu_group: 12,
    });
  });

  test('no driver loaded, driver/library mismatch, garbage output and no nvidia-smi: a state and a detail, never a throw', async () => {
    useSmiCase(smiDir, 'no-driver');
    const noDriver = await detect();
    expect(noDriver.devices).toEqual([]);
    expect(noDriver.status.state).toBe('no_driver');
    expect(noDriver.status.detail).toMatch(
      /^NVIDIA driver not loaded \(nvidia-smi exit 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver/,
    );
    expect(noDriver.status.detail).toContain('1 NVIDIA GPU(s) on the PCI bus (0000:18:00.0)');
    useSmiCase(smiDir, 'mismatch');
    const mismatch = await detect();
    expect(mismatch.status.state).toBe('error');
    expect(mismatch.status.detail).toMatch(
      /^NVIDIA driver\/library version mismatch: .*reload the nvidia module or reboot \(nvidia-smi exit 18: Failed to initialize NVML: Driver\/library version mismatch\)$/,
    );
    useSmiCase(smiDir, 'garbage');
    const garbage = await detect();
    expect(garbage.status).toMatchObject({ state: 'error' });
    expect(garbage.status.detail).toMatch(
      /^nvidia-smi printed what cannot be parsed: a --query-gpu line has 5 columns/,
    );
    const missing = await detectGpus({
      nvidiaSmi: join(dir, 'no-such-nvidia-smi'),
      sysfs: join(dir, 'sys'),
      accelerator: 'kvm',
    });
    expect(missing.status).toMatchObject({ state: 'no_driver' });
    expect(missing.status.detail).toContain('nvidia-smi is not installed');
    fakeSysfs(join(dir, 'sys'), []);
    const none = await detectGpus({
      nvidiaSmi: join(dir, 'no-such-nvidia-smi'),
      sysfs: join(dir, 'sys'),
      accelerator: 'tcg',
    });
    expect(none.status.state).toBe('no_gpu');
  });

  test('passthrough names what is missing: KVM, an IOMMU, the vfio-pci driver', async () => {
    gpuHost('0000:18:00.0', { vfio: false, iommu: false });
    useSmiCase(smiDir, 'h100');
    const { devices, status } = await detect('tcg');
    expect(status.passthrough.available).toBe(false);
    expect(status.passthrough.missing).toEqual([
      expect.stringMatching(/^KVM \(VMs here run under tcg/),
      expect.stringMatching(/^an IOMMU \(no group under \/sys\/kernel\/iommu_groups/),
      'the vfio-pci driver (not loaded: modprobe vfio-pci)',
    ]);
    expect(devices[0]).toMatchObject({ iommu_group: null, iommu_group_devices: [] });
  });
});

describe('GPU manager: holds, release at stop and at agent restart', () => {
  // The test's stand-in for the kernel: a bind or unbind re-points the driver link.
  const moves: string[] = [];
  const kernel = {
    bind: async (sysfs: string, a: string) => {
      moves.push(`bind ${a}`);
      setDriver(sysfs, a, 'vfio-pci');
      return null;
    },
    unbind: async (sysfs: string, a: string) => {
      moves.push(`unbind ${a}`);
      setDriver(sysfs, a, a.endsWith('.1') ? 'snd_hda_intel' : 'nvidia');
    },
  };
  const data = join(dir, 'data');
  const manager = (accelerator = 'kvm') =>
    new GpuManager({ nvidiaSmi, sysfs: join(dir, 'sys'), accelerator, dataDir: data, logger, vfio: kernel });
  beforeEach(() => {
    gpuHost('0000:18:00.0');
    useSmiCase(smiDir, 'h100');
    rmSync(data, { recursive: true, force: true });
    mkdirSync(data, { recursive: true });
    moves.length = 0;
  });

  test('a whole H100 is held by its VM (its IOMMU group bound to vfio-pci), refused to a second VM, released at stop', async () => {
    const gpus = manager();
    expect((await gpus.info()).gpus).toEqual([{ model: 'h100', count: 1, free: 1, mig_profiles: [] }]);
    expect(await gpus.reserve('vm1', { model: 'h100', count: 1 })).toEqual([
      { functions: ['0000:18:00.0', '0000:18:00.1'] },
    ]);
    expect(moves).toEqual(['bind 0000:18:00.0', 'bind 0000:18:00.1']);
    const held = await gpus.info();
    expect(held.gpus).toEqual([{ model: 'h100', count: 1, free: 0, mig_profiles: [] }]);
    expect(held.gpu_devices[0]).toMatchObject({ held_by: 'vm1', driver: 'vfio-pci' });
    await expect(gpus.reserve('vm2', { model: 'h100', count: 1 })).rejects.toMatchObject({
      code: 'conflict',
      message: '0 of 1 h100 GPUs free on this host',
    });
    await expect(gpus.reserve('vm2', { model: 'h200', count: 1 })).rejects.toMatchObject({
      message: '0 of 1 h200 GPUs free on this host',
    });
    await gpus.release('vm1');
    expect(moves.slice(2)).toEqual(['unbind 0000:18:00.0', 'unbind 0000:18:00.1']);
    expect(readlinkSync(join(dir, 'sys/bus/pci/devices/0000:18:00.0/driver'))).toMatch(/nvidia$/);
    expect((await gpus.info()).gpus[0]?.free).toBe(1);
  });

  test('at agent restart: the GPUs of a VM that did not come back are given back; a re-adopted VM keeps its own', async () => {
    await manager().reserve('gone', { model: 'h100', count: 1 });
    moves.length = 0;
    const restarted = manager();
    await restarted.recover(() => false);
    expect(moves).toEqual(['unbind 0000:18:00.0', 'unbind 0000:18:00.1']);
    expect((await restarted.info()).gpus[0]?.free).toBe(1);
    await restarted.reserve('kept', { model: 'h100', count: 1 });
    moves.length = 0;
    const again = manager();
    await again.recover((id) => id === 'kept');
    expect(moves).toEqual([]);
    expect(again.heldBy('kept')).toEqual([{ functions: ['0000:18:00.0', '0000:18:00.1'] }]);
    expect((await again.info()).gpu_devices[0]?.held_by).toBe('kept');
  });

  test('refusals say why: a MIG profile for a VM, passthrough missing, nothing bound', async () => {
    await expect(manager().reserve('vm1', { model: 'h100', count: 1, mig: '1g.10gb' })).rejects.toMatchObject(
      {
        code: 'invalid_argument',
        message: expect.stringMatching(
          /^spec\.gpu\.mig 1g\.10gb: MIG slices cannot be passed to a VM: a MIG instance is not a PCI device/,
        ),
        details: { reason: 'mig_not_passable' },
      },
    );
    gpuHost('0000:18:00.0', { vfio: false });
    await expect(manager('tcg').reserve('vm1', { model: 'h100', count: 1 })).rejects.toMatchObject({
      code: 'invalid_argument',
      message: expect.stringMatching(
        /^this host detects GPUs but cannot pass them to a VM: missing KVM .*; the vfio-pci driver/,
      ),
      details: { reason: 'no_passthrough' },
    });
    useSmiCase(smiDir, 'no-driver');
    gpuHost('0000:18:00.0');
    await expect(manager().reserve('vm1', { model: 'h100', count: 1 })).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringMatching(/^GPU detection failed: NVIDIA driver not loaded/),
    });
    expect(moves).toEqual([]);
  });
});

describe('vfio-pci binding through sysfs', () => {
  test('bind writes driver_override, unbinds the old driver, probes; a device that did not move is an error naming it', async () => {
    const sys = gpuHost('0000:18:00.0');
    // The fake tree does not act like a kernel: the driver stays nvidia, which bindVfio must notice.
    await expect(bindVfio(sys, '0000:18:00.0')).rejects.toThrow(
      '0000:18:00.0 did not bind to vfio-pci (its driver is nvidia; is the vfio-pci module loaded?)',
    );
    const dev = join(sys, 'bus/pci/devices/0000:18:00.0');
    expect(readFileSync(join(dev, 'driver_override'), 'utf8')).toBe('vfio-pci\n');
    expect(readFileSync(join(sys, 'bus/pci/drivers/nvidia/unbind'), 'utf8')).toBe('0000:18:00.0\n');
    expect(readFileSync(join(sys, 'bus/pci/drivers_probe'), 'utf8')).toBe('0000:18:00.0\n');
    setDriver(sys, '0000:18:00.0', 'vfio-pci');
    await unbindVfio(sys, '0000:18:00.0');
    expect(readFileSync(join(dev, 'driver_override'), 'utf8')).toBe('\n');
    expect(readFileSync(join(sys, 'bus/pci/drivers/vfio-pci/unbind'), 'utf8')).toBe('0000:18:00.0\n');
  });
});

describe('QEMU argv for GPU passthrough', () => {
  const base = (accelerator: 'kvm' | 'tcg') =>
    qemuArgv({
      accelerator,
      cpus: 4,
      ramMb: 8192,
      kernel: '/k/vmlinux',
      initramfs: '/k/initramfs.cpio',
      append: 'console=ttyS0',
      disk: '/vms/v/disk.qcow2',
      dir: '/vms/v',
      forwards: [],
      bindAddress: '127.0.0.1',
      serviceDisks: ['/images/pg/rootfs.img'],
    });

  test('q35 under KVM, virtio devices on PCI, one root port per GPU with its whole IOMMU group, before QMP', () => {
    const argv = withGpuPassthrough(base('kvm'), [
      { functions: ['0000:18:00.0', '0000:18:00.1'] },
      { functions: ['0000:3b:00.0'] },
    ]);
    const at = (flag: string) => argv.flatMap((a, i) => (a === flag ? [argv[i + 1]] : []));
    expect(at('-M')).toEqual(['q35']);
    expect(at('-accel')).toEqual(['kvm']);
    expect(at('-cpu')).toEqual(['host,host-phys-bits=on']);
    expect(at('-global')).toEqual(['q35-pcihost.pci-hole64-size=2048G']);
    expect(at('-device')).toEqual([
      'virtio-blk-pci,drive=root',
      expect.stringMatching(/^virtio-net-pci,netdev=n0/),
      'virtio-serial-pci',
      'virtserialport,chardev=agent,name=agent0',
      'virtserialport,chardev=log,name=log0',
      'virtio-rng-pci',
      'virtio-blk-pci,drive=svc0,serial=svc0',
      'pcie-root-port,id=gpu0port,bus=pcie.0,chassis=1,slot=1',
      'vfio-pci,host=0000:18:00.0,id=gpu0f0,bus=gpu0port,addr=0x0.0,multifunction=on',
      'vfio-pci,host=0000:18:00.1,id=gpu0f1,bus=gpu0port,addr=0x0.1',
      'pcie-root-port,id=gpu1port,bus=pcie.0,chassis=2,slot=2',
      'vfio-pci,host=0000:3b:00.0,id=gpu1f0,bus=gpu1port,addr=0x0.0',
    ]);
    expect(argv.indexOf('-qmp')).toBeGreaterThan(argv.lastIndexOf('-device'));
    expect(argv.some((a) => a.includes('-device,') || a.includes('microvm'))).toBe(false);
  });

  test('refused under TCG, and for anything that is not a PCI address', () => {
    expect(() => withGpuPassthrough(base('tcg'), [{ functions: ['0000:18:00.0'] }])).toThrow(
      'GPU passthrough needs KVM, and this VM runs under tcg',
    );
    expect(() => withGpuPassthrough(base('kvm'), [{ functions: ['0000:18:00.0,x-evil=1'] }])).toThrow(
      /is not a PCI address/,
    );
  });
});
