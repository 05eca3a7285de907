import { isIP } from 'node:net';

/**
 * The egress policy of guests, and the nftables ruleset that enforces it (pure: no I/O).
 *
 * Every VM's QEMU runs as its own uid from {@link EgressPolicy.uids}; QEMU's user-mode network
 * (slirp) opens the guest's outbound connections as ordinary sockets of that process, so a rule on
 * the socket owner (`meta skuid`) in the output hook sees every packet a guest sends out, and
 * nothing else. Order of the guests' chain (first match wins):
 *
 * 1. `ct state established,related accept`: the replies of connections others opened to the VM
 *    (a host client of an exposed port, hostfwd) and of connections already allowed;
 * 2. DNS (udp/tcp 53) to the host's resolvers (`/etc/resolv.conf`; slirp's 10.0.2.3 forwards to
 *    them), before the private ranges, since a resolver is often on one;
 * 3. `fib daddr type local` -> deny: every address of this host (10.0.2.2 is the host's loopback,
 *    the host's interface addresses, every VM's forwarded ports). No allow entry precedes it;
 * 4. the operator's deny list, then the operator's allow list (which may re-open a private range);
 * 5. link-local, private and special ranges -> deny;
 * 6. the internet: accepted, or denied when `internet` is false.
 *
 * "Deny" is a reject (TCP reset, else ICMP administratively prohibited), so a guest's connection
 * fails at once instead of hanging until its timeout.
 */
export interface EgressPolicy {
  /** The uids VMs' QEMU processes run as (inclusive). */
  readonly uids: { readonly first: number; readonly last: number };
  /** Whether guests may reach public addresses. */
  readonly internet: boolean;
  /** CIDRs guests may reach although they are private (never an address of this host). */
  readonly allow: readonly Cidr[];
  /** CIDRs guests may never reach (checked before the allow list). */
  readonly deny: readonly Cidr[];
  /** The host's DNS resolvers (what slirp forwards the guest's 10.0.2.3 to). */
  readonly resolvers: readonly string[];
}

/** One address range: `10.1.0.0/16`, `2001:db8::/32`; a bare address is a /32 or /128. */
export interface Cidr {
  readonly family: 4 | 6;
  readonly text: string;
}

/** Link-local, private and special-purpose ranges a guest never reaches unless allowed. */
export const BLOCKED_V4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
] as const;
/** The IPv6 counterparts: unspecified, loopback, mapped, NAT64, documentation, ULA, link-local, multicast. */
export const BLOCKED_V6 = [
  '::/128',
  '::1/128',
  '::ffff:0:0/96',
  '64:ff9b::/96',
  '100::/64',
  '2001:db8::/32',
  'fc00::/7',
  'fe80::/10',
  'fec0::/10',
  'ff00::/8',
] as const;

/** Parses `text` as a CIDR (or a bare address); undefined when it is not one. */
export function parseCidr(text: string): Cidr | undefined {
  const [addr = '', bits, ...rest] = text.trim().split('/');
  if (rest.length > 0) return undefined;
  const family = isIP(addr);
  if (family !== 4 && family !== 6) return undefined;
  const max = family === 4 ? 32 : 128;
  if (bits !== undefined && !(/^\d{1,3}$/.test(bits) && Number(bits) <= max)) return undefined;
  return { family, text: `${addr.toLowerCase()}/${bits ?? max}` };
}

/**
 * Whether `cidr` lies inside this host's loopback (127.0.0.0/8, ::1): an allow entry that could
 * only ever name the host itself, refused at configuration.
 */
export function isLoopbackCidr(cidr: Cidr): boolean {
  const [addr = '', bits = '0'] = cidr.text.split('/');
  if (cidr.family === 4) return addr.startsWith('127.') && Number(bits) >= 8;
  return addr === '::1';
}

/** The `nameserver` addresses of a resolv.conf text (a zone index such as `%eth0` dropped). */
export function resolversOf(resolvConf: string): string[] {
  const out: string[] = [];
  for (const line of resolvConf.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    const addr = m?.[1]?.split('%')[0];
    if (addr && isIP(addr) && !out.includes(addr)) out.push(addr);
  }
  return out;
}

/** The name of the agent's table for this uid range (agents with other ranges keep their own). */
export function egressTableName(policy: Pick<EgressPolicy, 'uids'>): string {
  return `orch_agent_${policy.uids.first}_${policy.uids.last}`;
}

const set = (items: readonly string[]): string => `{ ${items.join(', ')} }`;

function byFamily(cidrs: readonly Cidr[], family: 4 | 6): string[] {
  return cidrs.filter((c) => c.family === family).map((c) => c.text);
}

/**
 * The whole table as an `nft -f` script that replaces any previous version in one transaction
 * (`add table` then `delete table` then the definition: nft applies the file atomically, so there
 * is no moment without rules).
 */
export function egressRuleset(policy: EgressPolicy): string {
  const table = egressTableName(policy);
  const { first, last } = policy.uids;
  const dns4 = policy.resolvers.filter((r) => isIP(r) === 4);
  const dns6 = policy.resolvers.filter((r) => isIP(r) === 6);
  const lines = [
    `add table inet ${table}`,
    `delete table inet ${table}`,
    `table inet ${table} {`,
    '  chain output {',
    '    type filter hook output priority filter; policy accept;',
    `    meta skuid ${first}-${last} jump guest`,
    '  }',
    '  chain deny {',
    '    meta l4proto tcp reject with tcp reset',
    '    reject with icmpx type admin-prohibited',
    '  }',
    '  chain guest {',
    '    ct state established,related accept',
  ];
  for (const proto of ['udp', 'tcp']) {
    if (dns4.length) lines.push(`    ip daddr ${set(dns4)} ${proto} dport 53 accept`);
    if (dns6.length) lines.push(`    ip6 daddr ${set(dns6)} ${proto} dport 53 accept`);
  }
  lines.push('    fib daddr type local goto deny');
  for (const [verdict, list] of [
    ['goto deny', policy.deny],
    ['accept', policy.allow],
  ] as const) {
    const v4 = byFamily(list, 4);
    const v6 = byFamily(list, 6);
    if (v4.length) lines.push(`    ip daddr ${set(v4)} ${verdict}`);
    if (v6.length) lines.push(`    ip6 daddr ${set(v6)} ${verdict}`);
  }
  lines.push(`    ip daddr ${set(BLOCKED_V4)} goto deny`);
  lines.push(`    ip6 daddr ${set(BLOCKED_V6)} goto deny`);
  lines.push(policy.internet ? '    accept' : '    goto deny');
  lines.push('  }', '}', '');
  return lines.join('\n');
}
