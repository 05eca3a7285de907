import { chmod, chown } from 'node:fs/promises';
import { join } from 'node:path';
import type { CreateVmRequest } from '@orch/protocol';
import { sleep } from '@support/server';
import { AgentError, isDiskFull } from '../errors.js';
import { withGpuPassthrough } from '../gpu/passthrough-argv.js';
import type { Layout } from '../images/layout.js';
import type { VmUsers } from '../net/vm-users.js';
import { run } from '../util/run.js';
import type { Accelerator } from './accel.js';
import { GuestChannel } from './guest-channel.js';
import { randomMac, reidentifyScript } from './guest-identity.js';
import { connectUnix } from './line-socket.js';
import { qemuArgv } from './qemu-argv.js';
import { inheritedPath, spawnQemu } from './qemu-process.js';
import { Qmp } from './qmp.js';
import { loadState, loadStatePlain } from './saved-state.js';
import { type PreparedService, servicesStartupField } from './services.js';
import type { SnapshotMeta } from './snapshots.js';
import { shellQuote, type Vm } from './vm.js';

/**
 * What a VM boots from: an image (fresh overlay), a snapshot's disk (cold) or memory (live), or its
 * own saved state (a resume in place: its disk is already there).
 */
export interface BootSource {
  readonly kernelFile: string;
  readonly baseImage: string | undefined;
  readonly snapshot: SnapshotMeta | undefined;
  /** A live restore: QEMU loads the snapshot's `state.bin` and the guest resumes. */
  readonly live: boolean;
  /** A resume in place: the VM's own encrypted saved state (saved-state.ts) and its key's secret. */
  readonly saved?: { readonly file: string; readonly secret: string };
}

/** What a cold boot hands the guest: the create request's startup script and secrets, and its manifest. */
export interface GuestStart {
  readonly req: CreateVmRequest;
  /** The manifest JSON, decoded from `req.manifest_inline` once, when the create was checked. */
  readonly manifest: string;
  /** The manifest's services (services.ts). */
  readonly services: readonly PreparedService[];
}

export interface BootDeps {
  readonly layout: Layout;
  readonly qemu: string;
  readonly accelerator: Accelerator;
  readonly bindAddress: string;
  readonly bootTimeoutMs: number;
  /** The VMs' uids when network isolation is on (each QEMU runs as its own); undefined when off. */
  readonly users: VmUsers | undefined;
}

/**
 * Boots `vm` up to a guest agent that answers: its disk, QEMU, QMP, console and guest channel;
 * then on a cold boot the services and startup script of `start` (a create; absent on a resume in
 * place), on a live restore the resume ({@link resume}). Returns early (QEMU not started) when the
 * VM is being stopped meanwhile. The caller marks it running.
 */
export async function bootVm(
  deps: BootDeps,
  vm: Vm,
  start: GuestStart | undefined,
  from: BootSource,
  hooks: {
    /** QEMU runs (its pid is in the record): persist the record. */
    readonly onSpawned: () => Promise<void>;
    readonly onExit: (code: number | null, signal: NodeJS.Signals | null) => void;
  },
): Promise<void> {
  const { layout } = deps;
  const user = await vmUser(deps, vm);
  const disk = from.saved ? join(vm.dir, 'disk.qcow2') : await prepareDisk(layout, vm, from);
  if (user) await chown(disk, user.uid, user.gid);
  // A record written before backing_file existed: its overlay's backing file, from the disk itself.
  if (user && from.saved && vm.record.backing_file === undefined) {
    const backing = await backingFileOf(disk);
    if (backing) vm.record.backing_file = backing;
  }
  const incomingSocket = join(vm.dir, 'incoming.sock');
  // Running as its own uid, QEMU gets the files it only reads as inherited descriptors.
  const inherit: string[] = [];
  const input = (file: string) => {
    if (!user) return file;
    inherit.push(file);
    return inheritedPath(inherit.length - 1);
  };
  const microvmArgv = qemuArgv({
    accelerator: deps.accelerator,
    cpus: vm.record.spec.cpus,
    ramMb: vm.record.spec.ram_mb,
    kernel: input(from.kernelFile),
    initramfs: input(layout.initramfs),
    append: vm.record.append,
    disk,
    ...(user && vm.record.backing_file ? { backingFile: input(vm.record.backing_file) } : {}),
    dir: vm.dir,
    forwards: vm.record.ports.map((p) => ({ guest: p.port, host: p.host_port })),
    serviceDisks: (vm.record.service_disks ?? []).map(input),
    bindAddress: deps.bindAddress,
    ...(vm.record.mac ? { mac: vm.record.mac } : {}),
    ...(from.saved || from.live ? { incomingSocket } : {}),
  });
  const gpus = vm.record.gpu_passthrough ?? [];
  const argv = gpus.length > 0 ? withGpuPassthrough(microvmArgv, gpus) : microvmArgv;
  if (vm.intentionalStop) return;
  spawnQemu(vm, deps.qemu, argv, hooks.onExit, { user, inherit });
  vm.record.pid = vm.qemu?.pid ?? null;
  await hooks.onSpawned();
  const deadline = Date.now() + deps.bootTimeoutMs;
  vm.qmp = await Qmp.connect(join(vm.dir, 'qmp.sock'), Math.min(deadline, Date.now() + 20_000));
  vm.console = await connectUnix(join(vm.dir, 'console.sock'), deadline);
  vm.console.on('data', (b: Buffer) => vm.pushConsole(b));
  vm.console.on('error', () => undefined);
  await vm.log.attach(join(vm.dir, 'log.sock'), deadline);
  vm.channel = await GuestChannel.connect(join(vm.dir, 'agent.sock'), deadline);
  if (from.saved) {
    await loadState(from.saved.secret, from.saved.file, incomingSocket, deadline);
    await resume(vm, deadline, false);
  } else if (from.live) {
    const state = join(layout.snapshotDir(from.snapshot!.snapshot_id), 'state.bin');
    await loadStatePlain(state, incomingSocket, deadline);
    await resume(vm, deadline, true);
  } else await startGuest(vm, start!, deadline);
}

/** The backing file named in a qcow2 image's header, if any. */
async function backingFileOf(disk: string): Promise<string | undefined> {
  const info = JSON.parse(await run(['qemu-img', 'info', '-U', '--output=json', disk])) as {
    'full-backing-filename'?: string;
    'backing-filename'?: string;
  };
  return info['full-backing-filename'] ?? info['backing-filename'];
}

/**
 * The identity of the VM's QEMU when isolation is on: its recorded uid (a resume or restart keeps
 * it), or a fresh one of the range; its directory becomes `root:<its group>` mode 1770, so QEMU
 * can create its sockets there but cannot replace or remove the agent's files (sticky bit).
 */
async function vmUser(deps: BootDeps, vm: Vm) {
  if (!deps.users) return undefined;
  const uid = vm.record.uid;
  if (uid === undefined || !deps.users.inRange(uid)) vm.record.uid = await deps.users.allocate();
  else deps.users.claim(uid);
  const user = deps.users.user(vm.record.uid!);
  await chown(vm.dir, 0, user.gid);
  await chmod(vm.dir, 0o1770);
  return user;
}

/**
 * The VM's root disk: a thin qcow2 overlay on the image (virtual size `storage_gb`), or a copy of
 * the snapshot's flattened disk (grown to `storage_gb` on a cold boot). `ENOSPC` is `disk_full`.
 */
async function prepareDisk(layout: Layout, vm: Vm, from: BootSource): Promise<string> {
  const disk = join(vm.dir, 'disk.qcow2');
  const size = `${vm.record.spec.storage_gb}G`;
  try {
    if (from.baseImage) {
      await run(['qemu-img', 'create', '-q', '-f', 'qcow2', '-F', 'raw', '-b', from.baseImage, disk, size]);
    } else {
      const snapDir = layout.snapshotDir(from.snapshot!.snapshot_id);
      await run(['cp', '--sparse=always', join(snapDir, 'disk.qcow2'), disk]);
      // A live restore continues the startup script's log (its processes continue too).
      if (from.live) await vm.log.seed(join(snapDir, 'startup.log')).catch(() => undefined);
      if (!from.live && vm.record.spec.storage_gb > from.snapshot!.spec.storage_gb) {
        await run(['qemu-img', 'resize', '-q', disk, size]);
      }
    }
  } catch (err) {
    throw isDiskFull(err) ? AgentError.diskFull('the host disk is full: cannot create the VM disk') : err;
  }
  return disk;
}

/**
 * Cold boot: waits for the guest agent's hello, then starts the services and the startup script
 * with its secrets.
 */
async function startGuest(vm: Vm, { req, manifest, services }: GuestStart, deadline: number): Promise<void> {
  const channel = vm.channel!;
  await channel.waitHello(deadline, () => vm.alive);
  const env = Object.entries(req.secrets)
    .map(([k, v]) => `export ${k}=${shellQuote(v)}\n`)
    .join('');
  // The startup script begins with `cd <workspace>`: make sure the directory exists first.
  const workspace = workspaceOf(manifest);
  const prelude = workspace ? `mkdir -p ${shellQuote(workspace)}\n` : '';
  await channel.startup(req.startup_script, prelude + env, manifest, servicesStartupField(services));
}

/**
 * Live restore (`-incoming`): waits until QEMU has loaded the state (paused), resumes the guest
 * where it stopped, pings its agent (its port is open already: no hello), sets its clock, which
 * lags by the time the snapshot sat, and (`reidentify`: a restore of a snapshot, not a resume in
 * place of the same VM) gives it a fresh identity (guest-identity.ts: CRNG reseeded from host
 * entropy, its own MAC address and hostname), so that clones of one snapshot differ.
 */
export async function resume(vm: Vm, deadline: number, reidentify: boolean): Promise<void> {
  const qmp = vm.qmp!;
  const channel = vm.channel!;
  for (;;) {
    const status = await qmp.execute<{ status: string }>('query-status');
    if (status.status === 'paused' || status.status === 'postmigrate') break;
    if (status.status !== 'inmigrate') throw new Error(`restore failed: QEMU is ${status.status}`);
    if (Date.now() > deadline || !vm.alive) throw new Error('restore did not complete in time');
    await sleep(10);
  }
  await qmp.execute('cont');
  await channel.waitReady(deadline, () => vm.alive);
  await channel.setTime(Date.now() / 1000).catch(() => undefined);
  if (!reidentify) return;
  const script = reidentifyScript(vm.record.id, vm.record.mac ?? randomMac());
  const r = await channel.exec(script, Buffer.alloc(0), 30, 4096);
  if (r.exitCode !== 0) {
    const why = r.timedOut ? 'timed out' : `exit ${r.exitCode}: ${r.stderr.toString('utf8').trim()}`;
    throw new Error(`could not give the restored VM a fresh identity (RNG reseed, MAC, hostname): ${why}`);
  }
}

/** `machine.workspace` of a manifest, when it is an absolute path. */
function workspaceOf(manifestJson: string): string | undefined {
  try {
    const ws = (JSON.parse(manifestJson) as { machine?: { workspace?: unknown } }).machine?.workspace;
    return typeof ws === 'string' && ws.startsWith('/') ? ws : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Re-adoption after an agent restart: connects to the sockets of a QEMU that kept running (QMP,
 * console, guest channel: QEMU serves each and accepts a new client once the old one is gone),
 * resumes the vCPUs if the old agent died while they were stopped (in the middle of a pause or a
 * snapshot), and pings the guest agent.
 */
export async function attachVm(vm: Vm, deadline: number): Promise<void> {
  vm.qmp = await Qmp.connect(join(vm.dir, 'qmp.sock'), deadline);
  vm.console = await connectUnix(join(vm.dir, 'console.sock'), deadline);
  vm.console.on('data', (b: Buffer) => vm.pushConsole(b));
  vm.console.on('error', () => undefined);
  await vm.log.attach(join(vm.dir, 'log.sock'), deadline);
  vm.channel = await GuestChannel.connect(join(vm.dir, 'agent.sock'), deadline);
  const status = await vm.qmp.execute<{ status: string }>('query-status');
  if (status.status !== 'running') {
    // An unfinished migration of the old agent holds the VM stopped; cancel it and continue.
    await vm.qmp.execute('migrate_cancel').catch(() => undefined);
    await vm.qmp.execute('cont');
  }
  // The old agent's end closed the port's host side; the guest agent reads EOF, reopens its port
  // and says hello. Nothing is written before that (bytes sent to a port the guest has closed can
  // stay stuck in QEMU); pings only if no hello comes (the guest never saw the port close).
  await vm.channel
    .waitHello(Math.min(deadline, Date.now() + 10_000), () => vm.alive)
    .catch(() => vm.channel!.waitReady(deadline, () => vm.alive));
}
