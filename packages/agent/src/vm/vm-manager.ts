import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type AgentVm,
  type CreateSnapshotRequest,
  type CreateVmRequest,
  decodeManifestInline,
  EXEC_OUTPUT_LIMIT,
  type ExecRequest,
  type ExecResult,
  type LogWindowQuery,
  type Resources,
  type SnapshotArtifact,
} from '@orch/protocol';
import type { Logger } from 'pino';
import { AgentError } from '../errors.js';
import type { GpuManager } from '../gpu/gpu-manager.js';
import { refuseMemorySave } from '../gpu/vm-gpus.js';
import type { ImageStore } from '../images/image-store.js';
import { DEFAULT_IMAGE, type Layout } from '../images/layout.js';
import type { KernelMeta } from '../images/setup.js';
import type { AgentMetrics, BootMode } from '../metrics.js';
import { type IsolationStatus, requireIsolation } from '../net/isolation.js';
import type { VmUsers } from '../net/vm-users.js';
import type { Accelerator } from './accel.js';
import type { GuestChannel } from './guest-channel.js';
import { randomMac } from './guest-identity.js';
import { hostResources, MIN_FREE_BYTES, requireFreeSpace } from './host-capacity.js';
import type { HostPorts } from './host-ports.js';
import { kernelCmdline } from './qemu-argv.js';
import { decryptState } from './saved-state.js';
import { initialStatuses, prepareServices } from './services.js';
import { Snapshots } from './snapshots.js';
import { shellQuote as q, Vm } from './vm.js';
import { VmRuntime } from './vm-runtime.js';
import { VmServices } from './vm-services.js';

export interface VmManagerDeps {
  readonly layout: Layout;
  readonly images: ImageStore;
  readonly ports: HostPorts;
  readonly qemu: string;
  readonly qemuFound: () => Promise<boolean>;
  readonly kernel: () => Promise<KernelMeta | undefined>;
  /** The first line of `qemu --version` (live snapshots resume only under the same). */
  readonly qemuVersion: () => Promise<string>;
  readonly accelerator: Accelerator;
  readonly tscKhz: number | undefined;
  readonly bindAddress: string;
  readonly bootTimeoutMs: number;
  /** Network isolation: whether it is on and installed (creates are refused when on but not installed). */
  readonly isolation: IsolationStatus;
  /** The VMs' uids when isolation is on; undefined when it is off. */
  readonly users: VmUsers | undefined;
  /** Bytes of each VM's startup log kept on disk (startup-log.ts). */
  readonly startupLogBytes: number;
  /** The agent's bearer token: the key of paused VMs' saved state is derived from it (saved-state.ts). */
  readonly stateSecret: string;
  readonly logger: Logger;
  /** Boot, snapshot and exec series (metrics.ts); absent in unit tests. */
  readonly metrics?: AgentMetrics;
  /** The GPUs of a GPU host (gpu/); absent on a microvm host, which refuses spec.gpu. */
  readonly gpus?: GpuManager;
}

/**
 * All VMs and snapshots of this host. Errors are {@link AgentError}s; the API maps them. The VM
 * lifecycle is drawn on {@link Vm}; booting is `vm-boot.ts`, what happens to a VM over time
 * `vm-runtime.ts`, QEMU supervision `qemu-process.ts`, snapshots `snapshots.ts`, the services of
 * running VMs `vm-services.ts`, CPU, RAM and disk `host-capacity.ts`. Every id reaches a path only
 * through {@link Layout}, which refuses one that does not match its pattern.
 */
export class VmManager {
  private readonly vms = new Map<string, Vm>();
  /** The snapshots of this host (also read by the artifact transfer, transfer/). */
  readonly snapshots: Snapshots;
  /** The manifest services of the running VMs: status refresh (watched by the agent) and logs. */
  readonly services: VmServices;

  private readonly rt: VmRuntime;

  constructor(private readonly deps: VmManagerDeps) {
    this.snapshots = new Snapshots(deps);
    this.services = new VmServices(this.vms);
    this.rt = new VmRuntime(deps, this.vms);
  }

  /** At agent start: the VMs of the previous run ({@link VmRuntime.recover}). */
  async recover(): Promise<void> {
    await this.rt.recover();
  }

  list(): AgentVm[] {
    return [...this.vms.values()].map((v) => v.view());
  }

  get(id: string): AgentVm {
    return this.vm(id).view();
  }

  private vm(id: string): Vm {
    this.deps.layout.checkVmId(id);
    const vm = this.vms.get(id);
    if (!vm) throw AgentError.notFound('VM', id);
    return vm;
  }

  /** CPUs, RAM and disk: what the host has, and what live VMs leave free. */
  async resources(): Promise<{ capacity: Resources; free: Resources }> {
    return hostResources(this.deps.layout.root, this.vms.values());
  }

  /** `POST /v1/vms`: checks everything that can be checked at once, then boots in the background. */
  async create(req: CreateVmRequest): Promise<AgentVm> {
    const { layout } = this.deps;
    // Ids and names first: none of them reaches a path unless it matches its pattern.
    layout.checkVmId(req.id);
    for (const sid of [req.seed_snapshot_id, req.restore_snapshot_id])
      if (sid !== undefined) layout.checkSnapshotId(sid);
    if (req.spec.image !== undefined) layout.checkImageName(req.spec.image, 'spec.image');
    if (this.vms.has(req.id))
      throw AgentError.conflict(`VM ${JSON.stringify(req.id)} already exists`, { id: req.id });
    if (req.spec.gpu && !this.deps.gpus)
      throw AgentError.invalid('this host has no GPUs (spec.gpu is set)', { field: 'spec.gpu' });
    const badSecret = Object.keys(req.secrets).find((k) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(k));
    if (badSecret !== undefined) {
      throw AgentError.invalid(
        `secret name ${JSON.stringify(badSecret)} cannot be an environment variable name (letters, digits, _; not starting with a digit)`,
        { field: 'secrets' },
      );
    }
    if (req.seed_snapshot_id && req.restore_snapshot_id) {
      throw AgentError.invalid('set seed_snapshot_id or restore_snapshot_id, not both');
    }
    if (!(await this.deps.qemuFound())) {
      throw AgentError.missingTool(
        this.deps.qemu,
        'install Debian package qemu-system-x86 (orch-agent setup does)',
      );
    }
    requireIsolation(this.deps.isolation);
    const kernel = await this.deps.kernel();
    if (!kernel)
      throw AgentError.unavailable('no guest kernel on this host: run orch-agent setup', {
        reason: 'not_set_up',
      });
    const fromSnapshot = req.restore_snapshot_id ?? req.seed_snapshot_id;
    const snapshot = fromSnapshot ? await this.snapshots.meta(fromSnapshot) : undefined;
    // A snapshot's disk is the root filesystem: an image may come along only as the one it
    // descends from (a statement about it, not a second root filesystem).
    const descends = snapshot ? Snapshots.baseImage(snapshot) : undefined;
    if (snapshot && req.spec.image !== undefined && req.spec.image !== descends) {
      throw AgentError.invalid(
        descends === undefined
          ? `snapshot ${JSON.stringify(fromSnapshot)} does not record the image its disk descends from: leave spec.image out (the snapshot's disk is the root filesystem)`
          : `spec.image ${JSON.stringify(req.spec.image)} is not the image snapshot ${JSON.stringify(fromSnapshot)} descends from (${JSON.stringify(descends)}): its disk is the root filesystem; leave spec.image out or set it to ${JSON.stringify(descends)}`,
        { field: 'spec.image' },
      );
    }
    const image = snapshot ? undefined : (req.spec.image ?? DEFAULT_IMAGE);
    const base = image ?? descends;
    const baseImage = image ? await this.deps.images.resolve(image) : undefined;
    // Decoded once: a malformed manifest is refused here, before anything is written.
    const manifest = decodeManifestInline(req.manifest_inline);
    const services = await prepareServices(layout, this.deps.images, manifest, req.secrets);
    const live = !!req.restore_snapshot_id && snapshot?.kind === 'live';
    if (live && req.spec.gpu) refuseMemorySave({ id: req.id, gpu_passthrough: [] }, 'a live restore', true);
    const liveKernel = live ? await this.snapshots.portableHere(snapshot!, kernel) : undefined;
    await requireFreeSpace(layout.root, MIN_FREE_BYTES);
    // A live restore resumes the guest as it was: same CPUs and RAM as when it was taken.
    const spec = live ? { ...req.spec, cpus: snapshot!.spec.cpus, ram_mb: snapshot!.spec.ram_mb } : req.spec;
    const dir = layout.vmDir(req.id);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const now = new Date().toISOString();
    const ports = [];
    for (const e of req.expose)
      ports.push({ port: e.port, as: e.as, host_port: await this.deps.ports.allocate() });
    const vm = new Vm(
      {
        id: req.id,
        state: 'creating',
        spec,
        ports,
        host_address: this.deps.bindAddress,
        accelerator: this.deps.accelerator,
        created_at: now,
        started_at: null,
        expires_at: null,
        error: null,
        restored_from: req.restore_snapshot_id ?? null,
        pid: null,
        append: live ? snapshot!.append : kernelCmdline(req.id, this.deps.tscKhz),
        mac: randomMac(),
        services: initialStatuses(services.map((s) => s.service)),
        service_disks: services.map((s) => s.imageFile),
        ...(baseImage ? { backing_file: baseImage } : {}),
        ...(base !== undefined ? { base_image: base } : {}),
      },
      dir,
      this.deps.startupLogBytes,
    );
    vm.portsHeld = true;
    const kernelFile = liveKernel ?? kernel.kernel;
    vm.record.kernel = kernelFile;
    // The last check: whole GPUs bound to vfio-pci for this VM (given back at its halt).
    if (req.spec.gpu)
      vm.record.gpu_passthrough = await this.deps.gpus!.reserve(req.id, req.spec.gpu).catch(async (err) => {
        this.rt.releasePorts(vm);
        await rm(dir, { recursive: true, force: true });
        throw err;
      });
    if (vm.record.gpu_passthrough?.length && this.deps.users) {
      // VFIO needs root's device access and locked memory: an isolated GPU VM is not done yet, and
      // running its QEMU as root would leave its network open. Refused, not run open.
      await this.deps.gpus?.release(req.id);
      this.rt.releasePorts(vm);
      await rm(dir, { recursive: true, force: true });
      throw AgentError.unavailable(
        'a VM with GPU passthrough cannot run under network isolation yet (its QEMU would need root for VFIO); AGENT_ISOLATION=off on GPU hosts runs it without isolation (unsafe)',
        { reason: 'isolation_unavailable' },
      );
    }
    this.vms.set(req.id, vm);
    await this.rt.save(vm);
    const mode: BootMode = live ? 'live_restore' : fromSnapshot ? 'disk_snapshot' : 'cold';
    this.rt.startBoot(vm, { req, manifest, services }, { kernelFile, baseImage, snapshot, live }, mode);
    return vm.view();
  }

  /** `DELETE /v1/vms/{id}`: stops QEMU and removes the VM's directory (disk, sockets, log). */
  async delete(id: string): Promise<void> {
    const vm = this.vm(id);
    this.vms.delete(id);
    vm.intentionalStop = true;
    await vm.busy.catch(() => undefined);
    await this.rt.halt(vm, vm.record.state === 'error' ? 'error' : 'stopped', vm.record.error);
    await rm(vm.dir, { recursive: true, force: true });
    this.deps.users?.release(vm.record.uid);
    this.deps.logger.info({ vm: id }, 'VM deleted');
  }

  /**
   * Agent shutdown: suspends every running VM (its state saved encrypted, QEMU ended; resumed at the
   * next start), waits for pauses and resumes under way; a VM that cannot be suspended (still
   * booting, or the save failed) is stopped and reads `error`.
   */
  async stopAll(): Promise<void> {
    await Promise.all(
      [...this.vms.values()].map(async (vm) => {
        await vm.busy.catch(() => undefined);
        // GPU VMs cannot be suspended (gpu/vm-gpus.ts): they keep running and are re-adopted.
        if (vm.record.gpu_passthrough?.length && vm.record.state === 'running' && vm.alive) return;
        if (vm.record.state === 'running' && vm.alive) {
          try {
            await this.rt.suspend(vm, true);
            return;
          } catch (err) {
            this.deps.logger.warn({ vm: vm.record.id, err: (err as Error).message }, 'suspend failed');
          }
        }
        if (vm.alive) await this.rt.halt(vm, 'error', 'orch-agent stopped; the VM stopped with it');
      }),
    );
  }

  /** `POST /v1/vms/{id}/pause`: `running` -> `pausing` -> `paused`; 409 in any other state. */
  async pause(id: string): Promise<AgentVm> {
    const vm = this.vm(id);
    this.requireState(vm, 'running', 'paused');
    refuseMemorySave(vm.record, 'a pause');
    await this.rt.suspend(vm, false);
    return vm.view();
  }

  /** `POST /v1/vms/{id}/resume`: `paused` -> `resuming` -> `running`; 409 in any other state. */
  async resume(id: string): Promise<AgentVm> {
    const vm = this.vm(id);
    this.requireState(vm, 'paused', 'resumed');
    await this.rt.resumeVm(vm);
    return vm.view();
  }

  private requireState(vm: Vm, state: 'running' | 'paused', verb: string): void {
    if (vm.record.state === state) return;
    throw AgentError.conflict(
      `VM ${JSON.stringify(vm.record.id)} is ${vm.record.state}: only a ${state} VM can be ${verb}`,
      { id: vm.record.id, state: vm.record.state },
    );
  }

  private running(id: string): Vm {
    const vm = this.vm(id);
    if (vm.record.state !== 'running' || !vm.channel) {
      throw AgentError.conflict(`VM ${JSON.stringify(id)} is ${vm.record.state}, not running`, {
        id,
        state: vm.record.state,
      });
    }
    return vm;
  }

  /** `POST /v1/vms/{id}/exec`: argv without a shell (quoted into a script for the guest's sh). */
  async exec(id: string, req: ExecRequest): Promise<ExecResult> {
    const vm = this.running(id);
    const script = [
      ...(req.cwd ? [`cd ${q(req.cwd)} || exit 126`] : []),
      ...Object.entries(req.env).map(([k, v]) => `export ${k}=${q(v)}`),
      `exec ${req.argv.map(q).join(' ')}`,
      '',
    ].join('\n');
    const stdin = req.stdin_base64 ? Buffer.from(req.stdin_base64, 'base64') : Buffer.alloc(0);
    const started = Date.now();
    let r: Awaited<ReturnType<GuestChannel['exec']>>;
    try {
      r = await vm.channel!.exec(script, stdin, req.timeout_seconds, EXEC_OUTPUT_LIMIT);
    } catch (err) {
      this.deps.metrics?.execs.inc({ outcome: 'failed' });
      throw AgentError.unavailable(`exec failed: ${(err as Error).message}`, { id });
    }
    this.deps.metrics?.execs.inc({ outcome: r.timedOut ? 'timed_out' : 'exited' });
    this.deps.metrics?.execDuration.observe((Date.now() - started) / 1000);
    return {
      exit_code: r.exitCode,
      stdout_base64: r.stdout.toString('base64'),
      stderr_base64: r.stderr.toString('base64'),
      timed_out: r.timedOut,
      truncated: r.stdoutBytes > EXEC_OUTPUT_LIMIT || r.stderrBytes > EXEC_OUTPUT_LIMIT,
      duration_ms: Date.now() - started,
    };
  }

  /**
   * `GET /v1/vms/{id}/log`: a window of the startup script's output so far (see `logWindow` of
   * @orch/protocol; offsets are absolute, and what rotation dropped is gone: startup-log.ts); a VM
   * whose script has written nothing yet has an empty log.
   */
  async log(id: string, query: LogWindowQuery): Promise<{ bytes: Buffer; offset: number; size: number }> {
    return this.vm(id).log.read(query);
  }

  /** `GET /v1/vms/{id}/log?service=NAME`: see {@link VmServices.log}; the VM must be running. */
  async serviceLog(
    id: string,
    name: string,
    window: { offset?: number | undefined; tail?: number | undefined },
  ): Promise<{ bytes: Buffer; offset: number; size: number }> {
    return this.services.log(this.running(id), name, window);
  }

  /** Attaches to the serial console: `onData` gets guest output (an empty buffer at the end); returns the writer and a detach function. */
  attachConsole(
    id: string,
    onData: (data: Buffer) => void,
  ): { write: (data: Buffer) => void; detach: () => void } {
    const vm = this.running(id);
    vm.consoleClients.add(onData);
    return {
      write: (data) => {
        vm.console?.write(data);
      },
      detach: () => {
        vm.consoleClients.delete(onData);
      },
    };
  }

  /** `POST /v1/vms/{id}/snapshots`: see {@link Snapshots.take}; serialized with the VM's other work. */
  async snapshot(id: string, req: CreateSnapshotRequest): Promise<SnapshotArtifact> {
    const paused = this.vm(id);
    if (this.snapshots.exists(req.snapshot_id)) {
      throw AgentError.conflict(`snapshot ${JSON.stringify(req.snapshot_id)} already exists`, {
        snapshot_id: req.snapshot_id,
      });
    }
    if (paused.record.state === 'paused' && req.live) {
      // A paused VM's memory is its saved state: a live snapshot of it (to move it elsewhere).
      const file = join(paused.dir, 'state.enc');
      const task = paused.busy.then(() =>
        this.snapshots.fromSaved(paused, req.snapshot_id, (out) =>
          decryptState(this.deps.stateSecret, file, out),
        ),
      );
      paused.busy = task.catch(() => undefined);
      return task;
    }
    const vm = this.running(id);
    if (req.live) refuseMemorySave(vm.record, 'a live snapshot');
    const diskBytes = (await stat(join(vm.dir, 'disk.qcow2'))).blocks * 512;
    await requireFreeSpace(
      this.deps.layout.root,
      MIN_FREE_BYTES + diskBytes + (req.live ? vm.record.spec.ram_mb * 2 ** 20 : 0),
    );
    const task = vm.busy.then(() => this.measuredSnapshot(vm, req));
    vm.busy = task.catch(() => undefined);
    return task;
  }

  private async measuredSnapshot(vm: Vm, req: CreateSnapshotRequest): Promise<SnapshotArtifact> {
    const started = performance.now();
    try {
      const artifact = await this.snapshots.take(vm, req);
      this.deps.metrics?.snapshots.inc({ kind: artifact.kind, outcome: 'ok' });
      this.deps.metrics?.snapshotDuration.observe(
        { kind: artifact.kind },
        (performance.now() - started) / 1000,
      );
      return artifact;
    } catch (err) {
      this.deps.metrics?.snapshots.inc({ kind: req.live ? 'live' : 'disk', outcome: 'failed' });
      throw err;
    }
  }

  /** `DELETE /v1/snapshots/{id}`. VMs restored from it have their own copy of the disk. */
  async deleteSnapshot(id: string): Promise<void> {
    await this.snapshots.delete(id);
  }

  /** `GET /v1/snapshots/{id}/data`: the rootfs artifact (the qcow2 whose sha256 is `digest`). */
  async snapshotData(id: string): Promise<{ path: string; size: number }> {
    return this.snapshots.data(id);
  }
}
