import type { Socket } from 'node:net';
import { AGENT_VM_TRANSITIONS, type AgentVm, type AgentVmState, canTransition } from '@orch/protocol';
import type { LongTimer } from '@support/server';
import type { PassthroughGpu } from '../gpu/passthrough-argv.js';
import type { GuestChannel } from './guest-channel.js';
import type { QemuHandle } from './qemu-process.js';
import type { Qmp } from './qmp.js';
import { StartupLog } from './startup-log.js';

/** What `vms/<id>/vm.json` holds: the AgentVm plus what a restart needs. Never a secret. */
export interface VmRecord extends AgentVm {
  pid: number | null;
  append: string;
  /** The NIC's MAC address, random per VM (a live restore gets its own too); absent in older records. */
  mac?: string;
  /** Milliseconds the VM ran before its last pause (max runtime counts running time only). */
  runtime_used_ms?: number;
  /** When the VM last became `running` (epoch ms): its running time since is `now - running_since`. */
  running_since?: number | null;
  /** Paused by the agent's own graceful stop: resumed when the agent starts again. */
  resume_at_start?: boolean;
  /** The guest kernel it booted (a resume in place needs the same one). */
  kernel?: string;
  /** The image files of its services' disks, in device order (a resume in place needs the same). */
  service_disks?: string[];
  /** Whole GPUs passed through (their IOMMU groups' PCI functions, bound to vfio-pci): gpu/. */
  gpu_passthrough?: PassthroughGpu[];
  /**
   * The uid its QEMU runs as (network isolation, net/vm-users.ts); kept across pause/resume and
   * agent restarts, since the egress rules match on it. Absent when isolation is off.
   */
  uid?: number;
  /** The image file its disk is a thin overlay of (QEMU running as `uid` gets it as a descriptor). */
  backing_file?: string;
  /**
   * The image its root filesystem descends from: the one it booted, or the one the snapshot it
   * started from descends from (recorded in that snapshot); absent when unknown (records and
   * snapshots written before it was kept).
   */
  base_image?: string;
}

const CONSOLE_TAIL_BYTES = 64 * 1024;
/** Terminal escape sequences, stripped from console text quoted in errors. */
const ANSI_ESCAPE = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*[a-zA-Z]`, 'g');

/**
 * One VM: its QEMU (a child, or adopted after an agent restart: qemu-process.ts), QMP, the guest
 * channel and the serial console. Its record moves only as `AGENT_VM_TRANSITIONS` in `@orch/protocol` draws it ({@link Vm.moveTo}),
 * pause and resume included (pausing, paused, resuming).
 */
export class Vm {
  qemu: QemuHandle | undefined;
  qmp: Qmp | undefined;
  channel: GuestChannel | undefined;
  console: Socket | undefined;
  readonly consoleClients = new Set<(data: Buffer) => void>();
  consoleTail: Buffer = Buffer.alloc(0);
  stderr = '';
  timer: LongTimer | undefined;
  /** Serializes snapshots, pause, resume and stop. */
  busy: Promise<unknown> = Promise.resolve();
  intentionalStop = false;
  /** Whether its `record.ports` are reserved in HostPorts (not while paused or stopped). */
  portsHeld = false;
  /** Its startup log on the host (bounded, rotated: startup-log.ts). */
  readonly log: StartupLog;

  constructor(
    public record: VmRecord,
    readonly dir: string,
    startupLogBytes: number,
  ) {
    this.log = new StartupLog(dir, startupLogBytes);
  }

  /**
   * Moves the record to `to` if `AGENT_VM_TRANSITIONS` allows it from the current state (staying in
   * a state is no move). A move the table does not draw is a bug in the agent, so it throws.
   */
  moveTo(to: AgentVmState): void {
    const from = this.record.state;
    if (from === to) return;
    if (!canTransition(AGENT_VM_TRANSITIONS, from, to)) {
      throw new Error(`VM ${this.record.id}: illegal state transition ${from} -> ${to}`);
    }
    this.record.state = to;
  }

  get alive(): boolean {
    return !!this.qemu?.alive;
  }

  view(): AgentVm {
    const {
      pid: _pid,
      append: _append,
      mac: _mac,
      runtime_used_ms: _used,
      running_since: _since,
      resume_at_start: _resume,
      kernel: _kernel,
      service_disks: _disks,
      uid: _uid,
      backing_file: _backing,
      base_image: _base,
      ...vm
    } = this.record;
    // A paused VM forwards nothing: its host ports are released (kept in the record to be asked
    // for again at the resume).
    return vm.state === 'paused' ? { ...vm, ports: [] } : vm;
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

/** One shell word: `s` single-quoted for the guest's sh. */
export const shellQuote = (s: string): string => `'${s.replace(/'/g, "'\\''")}'`;
