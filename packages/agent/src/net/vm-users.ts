import { readdirSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { AgentError } from '../errors.js';
import type { VmUser } from './isolation.js';

/**
 * The uids of this agent's VMs: one per VM from the configured range, kept in the VM's record, so
 * a pause/resume, a restore or a re-adoption after an agent restart keeps it (the egress rules
 * match on it). A uid is free when no record of this agent holds it and no process of the host
 * runs as it (another agent sharing the range, or anything else). The group is the uid's number
 * (no other member); `kvm` is added when the VM uses KVM.
 */
export class VmUsers {
  private readonly held = new Set<number>();

  constructor(
    private readonly range: { readonly first: number; readonly last: number },
    /** The gid of group `kvm` when VMs use KVM (they open /dev/kvm), else undefined. */
    private readonly kvmGid: number | undefined,
  ) {}

  /** Marks `uid` (from a VM record found at start) as taken. */
  claim(uid: number): void {
    this.held.add(uid);
  }

  /** Gives the uid back (VM deleted). */
  release(uid: number | undefined): void {
    if (uid !== undefined) this.held.delete(uid);
  }

  /** A free uid of the range, marked taken; `503` when every one is in use. */
  async allocate(): Promise<number> {
    const running = processUids();
    for (let uid = this.range.first; uid <= this.range.last; uid++) {
      if (this.held.has(uid) || running.has(uid)) continue;
      this.held.add(uid);
      return uid;
    }
    throw AgentError.unavailable(
      `every VM uid of ${this.range.first}-${this.range.last} is in use (AGENT_VM_UIDS): delete VMs or widen the range`,
      { reason: 'no_vm_uid' },
    );
  }

  /** Whether `uid` lies in the configured range (a record from another configuration may not). */
  inRange(uid: number): boolean {
    return uid >= this.range.first && uid <= this.range.last;
  }

  /** The identity QEMU of the VM with `uid` runs as. */
  user(uid: number): VmUser {
    return { uid, gid: uid, groups: this.kvmGid === undefined ? [] : [this.kvmGid] };
  }
}

/**
 * The uids of the host's processes (the owner of `/proc/<pid>`: its effective uid). Synchronous on
 * purpose: a few hundred `stat`s of procfs take microseconds each, while as many asynchronous
 * reads queue behind the thread pool (measured: 2 s under load).
 */
function processUids(): Set<number> {
  const out = new Set<number>();
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return out;
  }
  for (const p of entries) {
    if (!/^\d+$/.test(p)) continue;
    try {
      out.add(statSync(`/proc/${p}`).uid);
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** The gid of group `name` in /etc/group, if it exists. */
export async function groupId(name: string): Promise<number | undefined> {
  const text = await readFile('/etc/group', 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    const [group, , gid] = line.split(':');
    if (group === name && gid && /^\d+$/.test(gid)) return Number(gid);
  }
  return undefined;
}
