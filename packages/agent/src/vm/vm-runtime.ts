import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setLongTimeout } from '@support/server';
import { AgentError } from '../errors.js';
import type { BootMode } from '../metrics.js';
import { adoptQemu, endQemu, killStaleQemu, qemuUnder } from './qemu-process.js';
import { saveState } from './saved-state.js';
import { Vm, type VmRecord } from './vm.js';
import { attachVm, type BootSource, bootVm, type GuestStart } from './vm-boot.js';
import type { VmManagerDeps } from './vm-manager.js';

/** How long saving a paused VM's state may take before the pause fails (and the VM runs on). */
const SAVE_TIMEOUT_MS = 300_000;

/**
 * What happens to one VM over time, shared by the requests of {@link VmManager}: its record on disk,
 * its first boot, the max runtime timer, QEMU's end (halt, stop), pause and resume in place (the
 * saved state, saved-state.ts) and re-adoption after an agent restart. The transitions are the ones drawn on
 * {@link Vm}; the work on one VM is serialized on `vm.busy`.
 */
export class VmRuntime {
  constructor(
    private readonly deps: VmManagerDeps,
    /** The manager's VMs by id: a VM no longer in it (deleted) is not written back. */
    private readonly vms: Map<string, Vm>,
  ) {}

  /**
   * At agent start, the VMs of the previous run (README "Agent restart"): a QEMU that kept running
   * (the agent was killed) is re-adopted; a VM the agent suspended at its graceful stop is resumed
   * (in the background); a VM whose QEMU is gone is `error`; any other QEMU under this data dir
   * is killed, so nothing is left holding forwarded ports.
   */
  async recover(): Promise<void> {
    const { layout, logger } = this.deps;
    await mkdir(layout.vmsDir, { recursive: true });
    await mkdir(layout.snapshotsDir, { recursive: true });
    const adopted = new Set<number>();
    const toResume: Vm[] = [];
    for (const id of await readdir(layout.vmsDir)) {
      if (!layout.isVmId(id)) {
        logger.warn({ entry: id }, 'ignoring an entry of the VMs directory that is not a VM id');
        continue;
      }
      const dir = layout.vmDir(id);
      let record: VmRecord;
      try {
        record = JSON.parse(await readFile(join(dir, 'vm.json'), 'utf8')) as VmRecord;
        record.services ??= []; // records written before services existed
      } catch {
        await rm(dir, { recursive: true, force: true });
        continue;
      }
      const vm = new Vm(record, dir, this.deps.startupLogBytes);
      this.vms.set(id, vm);
      if (record.uid !== undefined) this.deps.users?.claim(record.uid);
      const hasState = existsSync(join(dir, 'state.enc'));
      if (record.pid && (record.state === 'running' || record.state === 'pausing')) {
        if (await this.adopt(vm, record.pid)) {
          adopted.add(record.pid);
          continue;
        }
      } else if (record.pid) await killStaleQemu(record.pid, dir);
      if (record.state === 'resuming' && hasState) {
        // The old agent died while resuming: the saved state is intact; resume again.
        vm.record = { ...record, state: 'paused', pid: null, resume_at_start: true };
      } else if (['creating', 'running', 'pausing', 'resuming', 'stopping'].includes(record.state)) {
        vm.record = {
          ...record,
          state: 'error',
          error: 'orch-agent restarted; the VM stopped with it (its QEMU process is gone)',
          pid: null,
          ports: [],
        };
      } else if (record.state !== 'paused') vm.record.ports = [];
      await this.save(vm);
      if (vm.record.state === 'paused' && vm.record.resume_at_start) toResume.push(vm);
      logger.info({ vm: id, state: vm.record.state }, 'VM found after restart');
    }
    for (const pid of await qemuUnder(layout.vmsDir)) {
      if (adopted.has(pid)) continue;
      logger.warn({ pid }, 'killing a QEMU of this data dir that no VM record claims');
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    for (const vm of toResume) {
      void this.resumeVm(vm).catch((err: unknown) => {
        logger.warn({ vm: vm.record.id, err: (err as Error).message }, 'resume at agent start failed');
      });
    }
  }

  /** Re-adopts the QEMU `pid` that kept running while the agent was down; false if it is gone. */
  async adopt(vm: Vm, pid: number): Promise<boolean> {
    const { logger } = this.deps;
    if (!(await adoptQemu(vm, pid, () => void this.onQemuExit(vm, null, null)))) return false;
    try {
      await attachVm(vm, Date.now() + 30_000);
    } catch (err) {
      logger.warn({ vm: vm.record.id, err: (err as Error).message }, 'could not re-adopt the VM');
      vm.intentionalStop = true;
      await endQemu(vm);
      return false;
    }
    this.deps.ports.claim(vm.record.ports.map((p) => p.host_port));
    vm.portsHeld = true;
    await rm(join(vm.dir, 'state.enc'), { force: true });
    vm.moveTo('running');
    this.armTimer(vm);
    await this.save(vm);
    logger.info({ vm: vm.record.id, pid }, 'VM re-adopted after an agent restart');
    return true;
  }

  /**
   * Arms the max runtime timer of a running VM. Max runtime counts running time from the first
   * start: what ran before a pause (`runtime_used_ms`) plus the time since it last became running;
   * paused time does not count, and a resume does not reset it. `expires_at` says when it ends.
   */
  armTimer(vm: Vm): void {
    const { logger } = this.deps;
    vm.timer?.clear();
    const since = vm.record.running_since ?? Date.now();
    vm.record.running_since = since;
    const left = vm.record.spec.max_runtime_seconds * 1000 - (vm.record.runtime_used_ms ?? 0);
    vm.record.expires_at = new Date(since + left).toISOString();
    vm.timer = setLongTimeout(
      () => {
        if (vm.record.state !== 'running') return; // a pause under way: the resume re-arms it
        logger.info({ vm: vm.record.id }, 'max runtime reached; stopping the VM');
        void this.stop(
          vm,
          `max_runtime_seconds (${vm.record.spec.max_runtime_seconds} s) reached; the VM was stopped`,
        );
      },
      Math.max(0, since + left - Date.now()),
    );
    vm.timer.unref();
  }

  async onQemuExit(vm: Vm, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (vm.intentionalStop) return;
    if (vm.record.state === 'error' || vm.record.state === 'stopped') return;
    const why = `QEMU exited unexpectedly (${signal ? `signal ${signal}` : `exit ${code}`})`;
    this.deps.logger.warn({ vm: vm.record.id, code, signal }, why);
    await this.halt(vm, 'error', `${why}${vm.diagnostics() ? `\n${vm.diagnostics()}` : ''}`);
  }

  /** Ends QEMU (QMP quit, then SIGKILL) and frees ports and channels; keeps the record and disk. */
  async halt(vm: Vm, state: 'stopped' | 'error', error: string | null): Promise<void> {
    vm.intentionalStop = true;
    vm.timer?.clear();
    await endQemu(vm);
    this.releasePorts(vm);
    // Its GPUs go back to the host driver once QEMU is gone (stopped, error or deleted).
    if (vm.record.gpu_passthrough?.length) await this.deps.gpus?.release(vm.record.id);
    vm.moveTo(state);
    vm.record = { ...vm.record, error, pid: null, running_since: null };
    if (this.vms.get(vm.record.id) === vm) await this.save(vm).catch(() => undefined);
  }

  releasePorts(vm: Vm): void {
    if (vm.portsHeld) this.deps.ports.release(vm.record.ports.map((p) => p.host_port));
    vm.portsHeld = false;
  }

  async stop(vm: Vm, reason: string): Promise<void> {
    vm.moveTo('stopping');
    await this.save(vm);
    const run = vm.busy.then(() => this.halt(vm, 'stopped', reason));
    vm.busy = run.catch(() => undefined);
    await run;
  }

  /**
   * Saves the VM's memory and devices (encrypted, saved-state.ts) next to its disk, then ends QEMU
   * and frees its ports and timer: a paused VM holds no CPU, RAM or port. If the save fails the VM
   * runs on and the error is `unavailable`.
   */
  async suspend(vm: Vm, atAgentStop: boolean): Promise<void> {
    vm.moveTo('pausing');
    await this.save(vm);
    const task = vm.busy.then(async () => {
      if (vm.record.state !== 'pausing' || !vm.qmp) return;
      const started = Date.now();
      try {
        await vm.channel!.exec('exec sync\n', Buffer.alloc(0), 30, 1024).catch(() => undefined);
        await vm.qmp.execute('stop');
        const file = join(vm.dir, 'state.enc');
        const size = await saveState(
          vm.qmp,
          this.deps.stateSecret,
          file,
          join(vm.dir, 'outgoing.sock'),
          Date.now() + SAVE_TIMEOUT_MS,
          vm.record.uid,
        );
        this.deps.logger.info({ vm: vm.record.id, size, ms: Date.now() - started }, 'VM state saved');
      } catch (err) {
        await vm.qmp.execute('cont').catch(() => undefined);
        if (vm.record.state === 'pausing' && vm.alive) {
          vm.moveTo('running');
          await this.save(vm);
        }
        throw AgentError.unavailable(`pause failed: ${(err as Error).message}`, { id: vm.record.id });
      }
      vm.intentionalStop = true;
      vm.timer?.clear();
      await endQemu(vm);
      this.releasePorts(vm);
      const ran = Date.now() - (vm.record.running_since ?? Date.now());
      vm.moveTo('paused');
      vm.record = {
        ...vm.record,
        pid: null,
        expires_at: null,
        runtime_used_ms: (vm.record.runtime_used_ms ?? 0) + ran,
        running_since: null,
        resume_at_start: atAgentStop,
      };
      await this.save(vm);
      this.deps.logger.info({ vm: vm.record.id, atAgentStop }, 'VM paused');
    });
    vm.busy = task.catch(() => undefined);
    await task;
  }

  /**
   * The first boot of a VM just created (`vm-boot.ts`), in the background: `creating` -> `running`
   * and the max runtime timer, or `error` with QEMU's diagnostics; counted in the boot metrics
   * under `mode`. A VM deleted meanwhile just ends.
   */
  startBoot(vm: Vm, start: GuestStart, from: BootSource, mode: BootMode): void {
    const started = performance.now();
    void this.boot(vm, start, from)
      .then(() => {
        if (vm.record.state !== 'running') return;
        this.deps.metrics?.boots.inc({ mode, outcome: 'running' });
        this.deps.metrics?.bootDuration.observe({ mode }, (performance.now() - started) / 1000);
      })
      .catch(async (err: unknown) => {
        const message = err instanceof AgentError || err instanceof Error ? err.message : String(err);
        if (vm.intentionalStop) return;
        this.deps.metrics?.boots.inc({ mode, outcome: 'failed' });
        this.deps.logger.warn({ vm: vm.record.id, err: message }, 'VM failed to start');
        await this.halt(vm, 'error', `${message}${vm.diagnostics() ? `\n${vm.diagnostics()}` : ''}`);
      });
  }

  private async boot(vm: Vm, start: GuestStart, from: BootSource): Promise<void> {
    const { logger } = this.deps;
    await bootVm(this.deps, vm, start, from, {
      onSpawned: () => this.save(vm),
      onExit: (code, signal) => void this.onQemuExit(vm, code, signal),
    });
    if (vm.intentionalStop) return;
    vm.moveTo('running');
    vm.record.started_at = new Date().toISOString();
    vm.record.runtime_used_ms = 0;
    vm.record.running_since = Date.now();
    this.armTimer(vm);
    await this.save(vm);
    logger.info({ vm: vm.record.id, accelerator: vm.record.accelerator, live: from.live }, 'VM running');
  }

  /**
   * Starts QEMU on the VM's own disk with `-incoming`, streams the decrypted saved state into it and
   * continues the guest: same id, memory, processes, disk and (when still free) host ports. The
   * clock is set; the identity stays (it is the same VM). A failure makes the VM `error`.
   */
  async resumeVm(vm: Vm): Promise<void> {
    vm.moveTo('resuming');
    vm.record.resume_at_start = false;
    await this.save(vm);
    const task = vm.busy.then(async () => {
      if (vm.record.state !== 'resuming') return;
      const { logger } = this.deps;
      vm.intentionalStop = false;
      vm.qmp = undefined;
      vm.channel = undefined;
      vm.console = undefined;
      vm.stderr = '';
      const file = join(vm.dir, 'state.enc');
      try {
        for (const p of vm.record.ports) p.host_port = await this.deps.ports.allocate(p.host_port);
        vm.portsHeld = true;
        const kernelFile = vm.record.kernel ?? (await this.deps.kernel())?.kernel;
        if (!kernelFile) throw new Error('no guest kernel on this host: run orch-agent setup');
        await bootVm(
          this.deps,
          vm,
          undefined,
          {
            kernelFile,
            baseImage: undefined,
            snapshot: undefined,
            live: false,
            saved: { file, secret: this.deps.stateSecret },
          },
          {
            onSpawned: () => this.save(vm),
            onExit: (code, signal) => void this.onQemuExit(vm, code, signal),
          },
        );
      } catch (err) {
        if (vm.intentionalStop) return;
        const message = `resume failed: ${(err as Error).message}`;
        logger.warn({ vm: vm.record.id, err: message }, 'VM failed to resume');
        await this.halt(vm, 'error', `${message}${vm.diagnostics() ? `\n${vm.diagnostics()}` : ''}`);
        throw AgentError.unavailable(message, { id: vm.record.id });
      }
      if (vm.intentionalStop) return;
      await rm(file, { force: true });
      vm.moveTo('running');
      vm.record.error = null;
      vm.record.running_since = Date.now();
      this.armTimer(vm);
      await this.save(vm);
      logger.info({ vm: vm.record.id }, 'VM resumed');
    });
    vm.busy = task.catch(() => undefined);
    await task;
  }

  /** Writes the record whole (a temp file renamed over `vm.json`: a reader or a crash never sees half of it). */
  async save(vm: Vm): Promise<void> {
    if (!existsSync(vm.dir)) return;
    const tmp = join(vm.dir, `vm.json.${randomBytes(4).toString('hex')}.tmp`);
    await writeFile(tmp, `${JSON.stringify(vm.record, null, 2)}\n`);
    await rename(tmp, join(vm.dir, 'vm.json'));
  }
}
