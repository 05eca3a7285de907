import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { copyFile, mkdir, readdir, readFile, rm, stat, statfs, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import {
  type AgentVm,
  type CreateSnapshotRequest,
  type CreateVmRequest,
  EXEC_OUTPUT_LIMIT,
  type ExecRequest,
  type ExecResult,
  type Resources,
  type SnapshotArtifact,
} from '@orch/protocol';
import type { Logger } from 'pino';
import { AgentError, isDiskFull } from '../errors.js';
import type { ImageStore } from '../images/image-store.js';
import { DEFAULT_IMAGE, type Layout } from '../images/layout.js';
import type { KernelMeta } from '../images/setup.js';
import { CommandError, run } from '../util/run.js';
import type { Accelerator } from './accel.js';
import { GuestChannel } from './guest-channel.js';
import type { HostPorts } from './host-ports.js';
import { connectUnix } from './line-socket.js';
import { kernelCmdline, qemuArgv } from './qemu-argv.js';
import { Qmp } from './qmp.js';

/** What `vms/<id>/vm.json` holds: the AgentVm plus what a restart needs. Never a secret. */
interface VmRecord extends AgentVm {
  pid: number | null;
  append: string;
}

/** What `snapshots/<id>/snapshot.json` holds. */
interface SnapshotMeta extends SnapshotArtifact {
  readonly spec: AgentVm['spec'];
  readonly append: string;
  readonly kernel: string;
  readonly accelerator: Accelerator;
}

/** Free space below which VM disks and snapshots are refused (qcow2 disks grow as the guest writes). */
const MIN_FREE_BYTES = 512 * 2 ** 20;
const CONSOLE_TAIL_BYTES = 64 * 1024;
/** Terminal escape sequences, stripped from console text quoted in errors. */
const ANSI_ESCAPE = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*[a-zA-Z]`, 'g');

export interface VmManagerDeps {
  readonly layout: Layout;
  readonly images: ImageStore;
  readonly ports: HostPorts;
  readonly qemu: string;
  readonly qemuFound: () => Promise<boolean>;
  readonly kernel: () => Promise<KernelMeta | undefined>;
  readonly accelerator: Accelerator;
  readonly tscKhz: number | undefined;
  readonly bindAddress: string;
  readonly bootTimeoutMs: number;
  readonly logger: Logger;
}

/**
 * One VM: its QEMU child (started under `setpriv --pdeathsig KILL`, so it never outlives the agent),
 * QMP, the guest channel and the serial console.
 *
 *   creating --guest agent answers--> running --DELETE--> (removed)
 *      |                                 |--max runtime--> stopping --> stopped --DELETE--> (removed)
 *      +--boot failed / QEMU died--> error      +--QEMU died--> error --DELETE--> (removed)
 */
class Vm {
  proc: ChildProcess | undefined;
  qmp: Qmp | undefined;
  channel: GuestChannel | undefined;
  console: Socket | undefined;
  readonly consoleClients = new Set<(data: Buffer) => void>();
  consoleTail: Buffer = Buffer.alloc(0);
  stderr = '';
  timer: NodeJS.Timeout | undefined;
  /** Serializes snapshots and stop. */
  busy: Promise<unknown> = Promise.resolve();
  exited: Promise<void> = Promise.resolve();
  intentionalStop = false;

  constructor(
    public record: VmRecord,
    readonly dir: string,
  ) {}

  get alive(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  view(): AgentVm {
    const { pid: _pid, append: _append, ...vm } = this.record;
    return vm;
  }

  diagnostics(): string {
    const consoleText = this.consoleTail.toString('utf8').replace(ANSI_ESCAPE, '');
    return [
      this.stderr.trim() && `qemu: ${this.stderr.trim().slice(-1000)}`,
      consoleText.trim() && `console: ${consoleText.trim().slice(-1500)}`,
    ]
      .filter(Boolean)
      .join('\n');
  }

  pushConsole(data: Buffer): void {
    this.consoleTail = Buffer.concat([this.consoleTail, data]);
    if (this.consoleTail.length > CONSOLE_TAIL_BYTES)
      this.consoleTail = this.consoleTail.subarray(-CONSOLE_TAIL_BYTES);
    for (const c of this.consoleClients) c(data);
  }
}

const q = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

/**
 * All VMs and snapshots of this host. Errors are {@link AgentError}s; the API maps them.
 */
export class VmManager {
  private readonly vms = new Map<string, Vm>();

  constructor(private readonly deps: VmManagerDeps) {}

  /**
   * After an agent restart: VMs recorded as live had their QEMU killed with the old agent
   * (pdeathsig), so they are reported `error` ("gone") until deleted; nothing is left running.
   */
  async recover(): Promise<void> {
    const { layout, logger } = this.deps;
    await mkdir(layout.vmsDir, { recursive: true });
    await mkdir(layout.snapshotsDir, { recursive: true });
    for (const id of await readdir(layout.vmsDir)) {
      const dir = layout.vmDir(id);
      let record: VmRecord;
      try {
        record = JSON.parse(await readFile(join(dir, 'vm.json'), 'utf8')) as VmRecord;
      } catch {
        await rm(dir, { recursive: true, force: true });
        continue;
      }
      if (record.pid && (await isQemu(record.pid))) {
        try {
          process.kill(record.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      if (record.state === 'creating' || record.state === 'running' || record.state === 'stopping') {
        record = {
          ...record,
          state: 'error',
          error: 'orch-agent restarted; the VM stopped with it (its QEMU process is gone)',
          pid: null,
        };
      }
      record.ports = [];
      const vm = new Vm(record, dir);
      this.vms.set(id, vm);
      await this.save(vm);
      logger.info({ vm: id, state: record.state }, 'VM found after restart');
    }
  }

  list(): AgentVm[] {
    return [...this.vms.values()].map((v) => v.view());
  }

  get(id: string): AgentVm {
    return this.vm(id).view();
  }

  private vm(id: string): Vm {
    const vm = this.vms.get(id);
    if (!vm) throw AgentError.notFound('VM', id);
    return vm;
  }

  /** CPUs, RAM and disk: what the host has, and what live VMs leave free. */
  async resources(): Promise<{ capacity: Resources; free: Resources }> {
    const fs = await statfs(this.deps.layout.root).catch(() => undefined);
    const gb = 2 ** 30;
    const capacity = {
      cpus: cpus().length,
      ram_mb: Math.floor(totalmem() / 2 ** 20),
      disk_gb: fs ? Math.floor((fs.blocks * fs.bsize) / gb) : 0,
    };
    const live = [...this.vms.values()].filter(
      (v) => v.record.state === 'creating' || v.record.state === 'running',
    );
    return {
      capacity,
      free: {
        cpus: Math.max(0, capacity.cpus - live.reduce((n, v) => n + v.record.spec.cpus, 0)),
        ram_mb: Math.max(0, capacity.ram_mb - live.reduce((n, v) => n + v.record.spec.ram_mb, 0)),
        disk_gb: fs ? Math.floor((fs.bavail * fs.bsize) / gb) : 0,
      },
    };
  }

  /** `POST /v1/vms`: checks everything that can be checked at once, then boots in the background. */
  async create(req: CreateVmRequest): Promise<AgentVm> {
    const { layout } = this.deps;
    if (this.vms.has(req.id))
      throw AgentError.conflict(`VM ${JSON.stringify(req.id)} already exists`, { id: req.id });
    if (req.spec.gpu)
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
    const kernel = await this.deps.kernel();
    if (!kernel)
      throw AgentError.unavailable('no guest kernel on this host: run orch-agent setup', {
        reason: 'not_set_up',
      });
    const fromSnapshot = req.restore_snapshot_id ?? req.seed_snapshot_id;
    const snapshot = fromSnapshot ? await this.snapshotMeta(fromSnapshot) : undefined;
    if (snapshot && req.spec.image) {
      throw AgentError.invalid('spec.image and a snapshot both name the root filesystem: set only one');
    }
    const image = snapshot ? undefined : (req.spec.image ?? DEFAULT_IMAGE);
    const baseImage = image ? await this.deps.images.resolve(image) : undefined;
    const live = !!req.restore_snapshot_id && snapshot?.kind === 'live';
    if (live && snapshot!.accelerator !== this.deps.accelerator) {
      throw AgentError.invalid(
        `snapshot ${snapshot!.snapshot_id} was taken under ${snapshot!.accelerator}; this host runs ${this.deps.accelerator}`,
      );
    }
    await this.requireFreeSpace(MIN_FREE_BYTES);
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
      },
      dir,
    );
    this.vms.set(req.id, vm);
    await this.save(vm);
    const kernelFile = live ? snapshot!.kernel : kernel.kernel;
    void this.boot(vm, req, { kernelFile, baseImage, snapshot, live }).catch(async (err: unknown) => {
      const message = err instanceof AgentError || err instanceof Error ? err.message : String(err);
      if (vm.intentionalStop) return;
      this.deps.logger.warn({ vm: req.id, err: message }, 'VM failed to start');
      await this.halt(vm, 'error', `${message}${vm.diagnostics() ? `\n${vm.diagnostics()}` : ''}`);
    });
    return vm.view();
  }

  private async boot(
    vm: Vm,
    req: CreateVmRequest,
    from: {
      kernelFile: string;
      baseImage: string | undefined;
      snapshot: SnapshotMeta | undefined;
      live: boolean;
    },
  ): Promise<void> {
    const { layout, logger } = this.deps;
    const disk = join(vm.dir, 'disk.qcow2');
    const size = `${vm.record.spec.storage_gb}G`;
    try {
      if (from.baseImage) {
        await run(['qemu-img', 'create', '-q', '-f', 'qcow2', '-F', 'raw', '-b', from.baseImage, disk, size]);
      } else {
        const snapDir = layout.snapshotDir(from.snapshot!.snapshot_id);
        await run(['cp', '--sparse=always', join(snapDir, 'disk.qcow2'), disk]);
        // A live restore continues the startup script's log (its processes continue too).
        if (from.live)
          await copyFile(join(snapDir, 'startup.log'), join(vm.dir, 'startup.log')).catch(() => undefined);
        if (!from.live && vm.record.spec.storage_gb > from.snapshot!.spec.storage_gb) {
          await run(['qemu-img', 'resize', '-q', disk, size]);
        }
      }
    } catch (err) {
      throw isDiskFull(err) ? AgentError.diskFull('the host disk is full: cannot create the VM disk') : err;
    }
    const argv = qemuArgv({
      accelerator: this.deps.accelerator,
      cpus: vm.record.spec.cpus,
      ramMb: vm.record.spec.ram_mb,
      kernel: from.kernelFile,
      initramfs: layout.initramfs,
      append: vm.record.append,
      disk,
      dir: vm.dir,
      forwards: vm.record.ports.map((p) => ({ guest: p.port, host: p.host_port })),
      bindAddress: this.deps.bindAddress,
      ...(from.live
        ? { incomingStateFile: join(layout.snapshotDir(from.snapshot!.snapshot_id), 'state.bin') }
        : {}),
    });
    if (vm.intentionalStop) return;
    const proc = spawn('setpriv', ['--pdeathsig', 'KILL', '--', this.deps.qemu, ...argv], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    vm.proc = proc;
    vm.exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    proc.stderr!.on('data', (b: Buffer) => {
      vm.stderr = (vm.stderr + b.toString()).slice(-4000);
    });
    proc.once('error', (err) => {
      vm.stderr += String(err);
    });
    proc.once('exit', (code, signal) => void this.onQemuExit(vm, code, signal));
    vm.record.pid = proc.pid ?? null;
    await this.save(vm);
    const deadline = Date.now() + this.deps.bootTimeoutMs;
    const alive = () => vm.alive;
    vm.qmp = await Qmp.connect(join(vm.dir, 'qmp.sock'), Math.min(deadline, Date.now() + 20_000));
    vm.console = await connectUnix(join(vm.dir, 'console.sock'), deadline);
    vm.console.on('data', (b: Buffer) => vm.pushConsole(b));
    vm.console.on('error', () => undefined);
    vm.channel = await GuestChannel.connect(join(vm.dir, 'agent.sock'), deadline);
    if (from.live) {
      // -incoming: wait until the state is loaded (paused), then resume where it stopped.
      for (;;) {
        const status = await vm.qmp.execute<{ status: string }>('query-status');
        if (status.status === 'paused' || status.status === 'postmigrate') break;
        if (status.status !== 'inmigrate') throw new Error(`restore failed: QEMU is ${status.status}`);
        if (Date.now() > deadline || !alive()) throw new Error('restore did not complete in time');
        await sleep(10);
      }
      await vm.qmp.execute('cont');
      await vm.channel.waitReady(deadline, alive);
      await vm.channel.setTime(Date.now() / 1000).catch(() => undefined);
    } else {
      await vm.channel.waitHello(deadline, alive);
      const env = Object.entries(req.secrets)
        .map(([k, v]) => `export ${k}=${q(v)}\n`)
        .join('');
      const manifest = Buffer.from(req.manifest_inline, 'base64').toString('utf8');
      // The startup script begins with `cd <workspace>`: make sure the directory exists first.
      const workspace = workspaceOf(manifest);
      const prelude = workspace ? `mkdir -p ${q(workspace)}\n` : '';
      await vm.channel.startup(req.startup_script, prelude + env, manifest);
    }
    if (vm.intentionalStop) return;
    const started = new Date();
    vm.record.state = 'running';
    vm.record.started_at = started.toISOString();
    const maxMs = vm.record.spec.max_runtime_seconds * 1000;
    vm.record.expires_at = new Date(started.getTime() + maxMs).toISOString();
    vm.timer = setTimeout(() => {
      logger.info({ vm: vm.record.id }, 'max runtime reached; stopping the VM');
      void this.stop(
        vm,
        `max_runtime_seconds (${vm.record.spec.max_runtime_seconds} s) reached; the VM was stopped`,
      );
    }, maxMs);
    vm.timer.unref();
    await this.save(vm);
    logger.info({ vm: vm.record.id, accelerator: vm.record.accelerator, live: from.live }, 'VM running');
  }

  private async onQemuExit(vm: Vm, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (vm.intentionalStop) return;
    if (vm.record.state === 'error' || vm.record.state === 'stopped') return;
    const why = `QEMU exited unexpectedly (${signal ? `signal ${signal}` : `exit ${code}`})`;
    this.deps.logger.warn({ vm: vm.record.id, code, signal }, why);
    await this.halt(vm, 'error', `${why}${vm.diagnostics() ? `\n${vm.diagnostics()}` : ''}`);
  }

  /** Ends QEMU (QMP quit, then SIGKILL) and frees ports and channels; keeps the record and disk. */
  private async halt(vm: Vm, state: 'stopped' | 'error', error: string | null): Promise<void> {
    vm.intentionalStop = true;
    if (vm.timer) clearTimeout(vm.timer);
    if (vm.alive) {
      // A clean QMP quit when QMP is up; otherwise (still starting) there is nothing to save.
      if (vm.qmp) await vm.qmp.execute('quit').catch(() => undefined);
      else vm.proc?.kill('SIGKILL');
      const killer = setTimeout(() => vm.proc?.kill('SIGKILL'), 3000);
      await vm.exited;
      clearTimeout(killer);
    }
    vm.qmp?.close();
    vm.channel?.close();
    vm.console?.destroy();
    for (const c of vm.consoleClients) c(Buffer.alloc(0));
    vm.consoleClients.clear();
    this.deps.ports.release(vm.record.ports.map((p) => p.host_port));
    vm.record = { ...vm.record, state, error, pid: null };
    if (this.vms.get(vm.record.id) === vm) await this.save(vm).catch(() => undefined);
  }

  private async stop(vm: Vm, reason: string): Promise<void> {
    vm.record.state = 'stopping';
    await this.save(vm);
    const run = vm.busy.then(() => this.halt(vm, 'stopped', reason));
    vm.busy = run.catch(() => undefined);
    await run;
  }

  /** `DELETE /v1/vms/{id}`: stops QEMU and removes the VM's directory (disk, sockets, log). */
  async delete(id: string): Promise<void> {
    const vm = this.vm(id);
    this.vms.delete(id);
    vm.intentionalStop = true;
    await vm.busy.catch(() => undefined);
    await this.halt(vm, vm.record.state === 'error' ? 'error' : 'stopped', vm.record.error);
    await rm(vm.dir, { recursive: true, force: true });
    this.deps.logger.info({ vm: id }, 'VM deleted');
  }

  /** Stops every VM (agent shutdown); their records stay, reported gone at the next start. */
  async stopAll(): Promise<void> {
    await Promise.all(
      [...this.vms.values()].map((vm) =>
        vm.alive ? this.halt(vm, 'error', 'orch-agent stopped; the VM stopped with it') : undefined,
      ),
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
      throw AgentError.unavailable(`exec failed: ${(err as Error).message}`, { id });
    }
    return {
      exit_code: r.exitCode,
      stdout_base64: r.stdout.toString('base64'),
      stderr_base64: r.stderr.toString('base64'),
      timed_out: r.timedOut,
      truncated: r.stdoutBytes > EXEC_OUTPUT_LIMIT || r.stderrBytes > EXEC_OUTPUT_LIMIT,
      duration_ms: Date.now() - started,
    };
  }

  /** `GET /v1/vms/{id}/log`: the startup script's output so far. */
  async log(id: string): Promise<string> {
    const vm = this.vm(id);
    return readFile(join(vm.dir, 'startup.log'), 'utf8').catch(() => '');
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

  /**
   * `POST /v1/vms/{id}/snapshots`. The VM is paused (QMP `stop`, which drains and flushes the
   * disk) for the copy and resumed after. Disk: a flattened standalone qcow2 of the root disk.
   * Live: the migration stream (memory and devices, `exec:cat > state.bin`) plus the same disk
   * copy; if the migration fails, the snapshot falls back to disk and says `kind: disk`.
   */
  async snapshot(id: string, req: CreateSnapshotRequest): Promise<SnapshotArtifact> {
    const vm = this.running(id);
    const dir = this.deps.layout.snapshotDir(req.snapshot_id);
    if (existsSync(join(dir, 'snapshot.json'))) {
      throw AgentError.conflict(`snapshot ${JSON.stringify(req.snapshot_id)} already exists`, {
        snapshot_id: req.snapshot_id,
      });
    }
    const diskBytes = (await stat(join(vm.dir, 'disk.qcow2'))).blocks * 512;
    await this.requireFreeSpace(
      MIN_FREE_BYTES + diskBytes + (req.live ? vm.record.spec.ram_mb * 2 ** 20 : 0),
    );
    const task = vm.busy.then(() => this.takeSnapshot(vm, req, dir));
    vm.busy = task.catch(() => undefined);
    return task;
  }

  private async takeSnapshot(vm: Vm, req: CreateSnapshotRequest, dir: string): Promise<SnapshotArtifact> {
    const qmp = vm.qmp!;
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    let kind: 'disk' | 'live' = 'disk';
    // Flush the guest's page cache to its disk first, so that the disk artifact holds every write
    // the guest has made (the memory state alone would hide unwritten data from a cold boot).
    await vm.channel!.exec('exec sync\n', Buffer.alloc(0), 30, 1024).catch((err: unknown) => {
      this.deps.logger.warn(
        { vm: vm.record.id, err: (err as Error).message },
        'guest sync before the snapshot failed',
      );
    });
    try {
      await qmp.execute('stop');
      if (req.live) {
        try {
          await qmp.execute('migrate-set-parameters', { 'max-bandwidth': 8 * 2 ** 30 });
          const state = join(dir, 'state.bin');
          await qmp.execute('migrate', { uri: `exec:cat > ${q(state)}` });
          for (;;) {
            const m = await qmp.execute<{ status?: string; 'error-desc'?: string }>('query-migrate');
            if (m.status === 'completed') break;
            if (m.status === 'failed' || m.status === 'cancelled')
              throw new Error(m['error-desc'] ?? `migration ${m.status}`);
            await sleep(10);
          }
          kind = 'live';
        } catch (err) {
          this.deps.logger.warn(
            { vm: vm.record.id, err: (err as Error).message },
            'live snapshot failed; taking a disk snapshot',
          );
          await rm(join(dir, 'state.bin'), { force: true });
        }
      }
      await run([
        'qemu-img',
        'convert',
        '-U',
        '-O',
        'qcow2',
        join(vm.dir, 'disk.qcow2'),
        join(dir, 'disk.qcow2'),
      ]);
      if (kind === 'live')
        await copyFile(join(vm.dir, 'startup.log'), join(dir, 'startup.log')).catch(() => undefined);
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      if (isDiskFull(err))
        throw AgentError.diskFull('the host disk is full: the snapshot could not be written');
      throw err instanceof CommandError ? AgentError.unavailable(`snapshot failed: ${err.message}`) : err;
    } finally {
      await qmp.execute('cont').catch(() => undefined);
    }
    const files = ['disk.qcow2', ...(kind === 'live' ? ['state.bin'] : [])];
    let size = 0;
    for (const f of files) size += (await stat(join(dir, f))).size;
    const meta: SnapshotMeta = {
      snapshot_id: req.snapshot_id,
      vm_id: vm.record.id,
      kind,
      size_bytes: size,
      digest: await sha256File(join(dir, 'disk.qcow2')),
      arch: 'amd64',
      created_at: new Date().toISOString(),
      spec: vm.record.spec,
      append: vm.record.append,
      kernel: (await this.deps.kernel())!.kernel,
      accelerator: vm.record.accelerator as Accelerator,
    };
    await writeFile(join(dir, 'snapshot.json'), `${JSON.stringify(meta, null, 2)}\n`);
    this.deps.logger.info({ vm: vm.record.id, snapshot: req.snapshot_id, kind, size }, 'snapshot taken');
    return artifact(meta);
  }

  private async snapshotMeta(id: string): Promise<SnapshotMeta> {
    try {
      return JSON.parse(
        await readFile(join(this.deps.layout.snapshotDir(id), 'snapshot.json'), 'utf8'),
      ) as SnapshotMeta;
    } catch {
      throw AgentError.notFound('snapshot', id);
    }
  }

  /** `DELETE /v1/snapshots/{id}`. VMs restored from it have their own copy of the disk. */
  async deleteSnapshot(id: string): Promise<void> {
    await this.snapshotMeta(id);
    await rm(this.deps.layout.snapshotDir(id), { recursive: true, force: true });
  }

  /** `GET /v1/snapshots/{id}/data`: the rootfs artifact (the qcow2 whose sha256 is `digest`). */
  async snapshotData(id: string): Promise<{ path: string; size: number }> {
    await this.snapshotMeta(id);
    const path = join(this.deps.layout.snapshotDir(id), 'disk.qcow2');
    return { path, size: (await stat(path)).size };
  }

  private async requireFreeSpace(bytes: number): Promise<void> {
    const fs = await statfs(this.deps.layout.root);
    const free = fs.bavail * fs.bsize;
    if (free < bytes) {
      throw AgentError.diskFull(
        `not enough free disk space in ${this.deps.layout.root}: ${Math.floor(free / 2 ** 20)} MiB free, ${Math.ceil(bytes / 2 ** 20)} MiB needed`,
        { free_bytes: free, needed_bytes: bytes },
      );
    }
  }

  private async save(vm: Vm): Promise<void> {
    if (!existsSync(vm.dir)) return;
    await writeFile(join(vm.dir, 'vm.json'), `${JSON.stringify(vm.record, null, 2)}\n`);
  }
}

function artifact(m: SnapshotMeta): SnapshotArtifact {
  return {
    snapshot_id: m.snapshot_id,
    vm_id: m.vm_id,
    kind: m.kind,
    size_bytes: m.size_bytes,
    digest: m.digest,
    arch: m.arch,
    created_at: m.created_at,
  };
}

async function sha256File(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}

async function isQemu(pid: number): Promise<boolean> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.includes('qemu-system') && cmdline.includes('orch-vm');
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
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
