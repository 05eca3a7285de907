import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/** Whether `ip netns` works here (root and iproute2). Under CI=true its absence fails the suite. */
export function netnsAvailable(): boolean {
  const ok =
    process.getuid?.() === 0 && spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).status === 0;
  if (!ok && process.env.CI === 'true')
    throw new Error('the multi-host suite needs root and iproute2 (ip netns): run it as root on Debian');
  return ok;
}

/**
 * Several "hosts" on this machine: one network namespace each with its own address, joined by a
 * bridge in the root namespace that has the first address of the subnet (so orchd, and servers
 * the test starts, reach them). A private /24 picked at random in 10.200-10.249; traffic stays
 * between these namespaces and the bridge. `remove()` deletes all of it.
 */
export class HostNetwork {
  readonly bridge: string;
  readonly gateway: string;
  readonly hosts: { name: string; netns: string; address: string }[] = [];
  private readonly tag = randomBytes(3).toString('hex');
  private readonly subnet: string;

  constructor(names: readonly string[]) {
    const n = randomBytes(2);
    this.subnet = `10.${200 + ((n[0] ?? 0) % 50)}.${n[1] ?? 0}`;
    this.bridge = `otbr${this.tag}`;
    this.gateway = `${this.subnet}.1`;
    try {
      ip('link', 'add', this.bridge, 'type', 'bridge');
      ip('addr', 'add', `${this.gateway}/24`, 'dev', this.bridge);
      ip('link', 'set', this.bridge, 'up');
      names.forEach((name, i) => {
        const netns = `ot${this.tag}-${name}`;
        const peer = `ot${this.tag}${i}`;
        const address = `${this.subnet}.${i + 2}`;
        ip('netns', 'add', netns);
        this.hosts.push({ name, netns, address });
        ip('link', 'add', peer, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns);
        ip('link', 'set', peer, 'master', this.bridge, 'up');
        ip('-n', netns, 'addr', 'add', `${address}/24`, 'dev', 'eth0');
        ip('-n', netns, 'link', 'set', 'eth0', 'up');
        ip('-n', netns, 'link', 'set', 'lo', 'up');
      });
    } catch (err) {
      this.remove();
      throw err;
    }
  }

  host(name: string): { name: string; netns: string; address: string } {
    const h = this.hosts.find((x) => x.name === name);
    if (!h) throw new Error(`no host ${name}`);
    return h;
  }

  /** Deletes the namespaces (their veth ends go with them) and the bridge. */
  remove(): void {
    for (const h of this.hosts) spawnSync('ip', ['netns', 'del', h.netns]);
    spawnSync('ip', ['link', 'del', this.bridge]);
  }
}

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}
