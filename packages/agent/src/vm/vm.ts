import type { ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { AGENT_VM_TRANSITIONS, type AgentVm, type AgentVmState, canTransition } from '@orch/protocol';
import type { LongTimer } from '@support/server';
import type { GuestChannel } from './guest-channel.js';
import type { Qmp } from './qmp.js';

/** What `vms/<id>/vm.json` holds: the AgentVm plus what a restart needs. Never a secret. */
export interface VmRecord extends AgentVm {
  pid: number | null;
  append: string;
  /** The NIC's MAC address, random per VM (a live restore gets its own too); absent in older records. */
  mac?: string;
}

const CONSOLE_TAIL_BYTES = 64 * 1024;
/** Terminal escape sequences, stripped from console text quoted in errors. */
const ANSI_ESCAPE = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*[a-zA-Z]`, 'g');

/**
 * One VM: its QEMU child (started under `setpriv --pdeathsig KILL`, so it never outlives the agent),
 * QMP, the guest channel and the serial console.
 *
 * Its record moves only as `AGENT_VM_TRANSITIONS` in `@orch/protocol` draws it ({@link Vm.moveTo}).
 */
export class Vm {
  proc: ChildProcess | undefined;
  qmp: Qmp | undefined;
  channel: GuestChannel | undefined;
  console: Socket | undefined;
  readonly consoleClients = new Set<(data: Buffer) => void>();
  consoleTail: Buffer = Buffer.alloc(0);
  stderr = '';
  timer: LongTimer | undefined;
  /** Serializes snapshots and stop. */
  busy: Promise<unknown> = Promise.resolve();
  exited: Promise<void> = Promise.resolve();
  intentionalStop = false;

  constructor(
    public record: VmRecord,
    readonly dir: string,
  ) {}

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
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  view(): AgentVm {
    const { pid: _pid, append: _append, mac: _mac, ...vm } = this.record;
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

/** One shell word: `s` single-quoted for the guest's sh. */
export const shellQuote = (s: string): string => `'${s.replace(/'/g, "'\\''")}'`;
