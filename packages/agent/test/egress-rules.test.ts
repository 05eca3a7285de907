import { spawnSync } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import {
  BLOCKED_V4,
  type EgressPolicy,
  egressRuleset,
  egressTableName,
  isLoopbackCidr,
  parseCidr,
  resolversOf,
} from '../src/net/egress-rules.js';

const cidr = (s: string) => {
  const c = parseCidr(s);
  if (!c) throw new Error(`not a CIDR: ${s}`);
  return c;
};

const policy = (over: Partial<EgressPolicy> = {}): EgressPolicy => ({
  uids: { first: 900000, last: 900999 },
  internet: true,
  allow: [],
  deny: [],
  resolvers: ['10.255.255.53'],
  ...over,
});

/** The rules of the guests' chain, in order. */
function guestChain(script: string): string[] {
  const start = script.indexOf('  chain guest {');
  return script
    .slice(start)
    .split('\n')
    .slice(1)
    .map((l) => l.trim())
    .filter((l) => l && l !== '}');
}

describe('egress rules', () => {
  test('the guests chain: replies, DNS to the resolvers, the host itself, the ranges, then the internet', () => {
    const script = egressRuleset(policy());
    expect(script).toContain('meta skuid 900000-900999 jump guest');
    expect(script).toContain('type filter hook output priority filter; policy accept;');
    const rules = guestChain(script);
    expect(rules[0]).toBe('ct state established,related accept');
    expect(rules.slice(1, 3)).toEqual([
      'ip daddr { 10.255.255.53 } udp dport 53 accept',
      'ip daddr { 10.255.255.53 } tcp dport 53 accept',
    ]);
    expect(rules[3]).toBe('fib daddr type local goto deny');
    expect(rules[4]).toContain('169.254.0.0/16');
    expect(rules[4]).toContain('10.0.0.0/8');
    expect(rules[4]).toContain('127.0.0.0/8');
    expect(rules[4]).toMatch(/goto deny$/);
    expect(rules[5]).toContain('fe80::/10');
    expect(rules[5]).toContain('fc00::/7');
    expect(rules[5]).toContain('::1/128');
    expect(rules.at(-1)).toBe('accept');
    // Deny is a reject: a guest's connection fails at once.
    expect(script).toContain('meta l4proto tcp reject with tcp reset');
    expect(script).toContain('reject with icmpx type admin-prohibited');
  });

  test('no internet: the last verdict denies', () => {
    expect(guestChain(egressRuleset(policy({ internet: false }))).at(-1)).toBe('goto deny');
  });

  test('allow and deny lists come after the host rule (an allow entry never re-opens the host), deny first', () => {
    const rules = guestChain(
      egressRuleset(
        policy({
          allow: [cidr('10.20.0.0/16'), cidr('fd12::/16')],
          deny: [cidr('10.20.5.0/24'), cidr('8.8.8.8')],
        }),
      ),
    );
    const local = rules.indexOf('fib daddr type local goto deny');
    const deny = rules.indexOf('ip daddr { 10.20.5.0/24, 8.8.8.8/32 } goto deny');
    const allow4 = rules.indexOf('ip daddr { 10.20.0.0/16 } accept');
    const allow6 = rules.indexOf('ip6 daddr { fd12::/16 } accept');
    const ranges = rules.findIndex((r) => r.includes('169.254.0.0/16'));
    expect(local).toBeGreaterThan(0);
    expect(deny).toBeGreaterThan(local);
    expect(allow4).toBeGreaterThan(deny);
    expect(allow6).toBeGreaterThan(deny);
    expect(ranges).toBeGreaterThan(allow6);
  });

  test('IPv6 resolvers get their own DNS rules; no resolver, no DNS rule', () => {
    const rules = guestChain(egressRuleset(policy({ resolvers: ['fd00::53'] })));
    expect(rules).toContain('ip6 daddr { fd00::53 } udp dport 53 accept');
    expect(rules.some((r) => r.startsWith('ip daddr') && r.includes('dport 53'))).toBe(false);
    expect(guestChain(egressRuleset(policy({ resolvers: [] }))).some((r) => r.includes('dport 53'))).toBe(
      false,
    );
  });

  test('the script replaces the table atomically and names it by the uid range', () => {
    const script = egressRuleset(policy());
    const name = egressTableName(policy());
    expect(name).toBe('orch_agent_900000_900999');
    expect(script.split('\n').slice(0, 3)).toEqual([
      `add table inet ${name}`,
      `delete table inet ${name}`,
      `table inet ${name} {`,
    ]);
  });

  test('nft accepts the ruleset (nft --check)', () => {
    const found = spawnSync('sh', ['-c', 'command -v nft'], { encoding: 'utf8' }).status === 0;
    if (!found && process.env.CI === 'true') throw new Error('nft (Debian nftables) is required under CI');
    if (!found || process.getuid?.() !== 0) return;
    const script = egressRuleset(
      policy({
        internet: false,
        allow: [cidr('10.0.0.0/8'), cidr('10.1.0.0/16'), cidr('fd00::/8')],
        deny: [cidr('8.8.8.8')],
        resolvers: ['10.255.255.53', 'fe80::1'],
      }),
    );
    const r = spawnSync('nft', ['--check', '-f', '-'], { input: script, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  test('CIDRs, loopback entries and resolv.conf', () => {
    expect(parseCidr('10.1.2.0/24')).toEqual({ family: 4, text: '10.1.2.0/24' });
    expect(parseCidr('192.168.1.1')).toEqual({ family: 4, text: '192.168.1.1/32' });
    expect(parseCidr('FD00::/8')).toEqual({ family: 6, text: 'fd00::/8' });
    for (const bad of [
      '',
      '10.1.2.0/33',
      'fd00::/129',
      '10.1.2/24',
      'host.example',
      '1.2.3.4/8/9',
      '1.2.3.4/ 8',
    ])
      expect(parseCidr(bad), bad).toBeUndefined();
    expect(isLoopbackCidr(cidr('127.0.0.1'))).toBe(true);
    expect(isLoopbackCidr(cidr('127.0.0.0/8'))).toBe(true);
    expect(isLoopbackCidr(cidr('::1'))).toBe(true);
    expect(isLoopbackCidr(cidr('10.0.0.0/8'))).toBe(false);
    expect(
      resolversOf('# c\nnameserver 10.255.255.53\nnameserver fe80::1%eth0\nsearch x\nnameserver bad\n'),
    ).toEqual(['10.255.255.53', 'fe80::1']);
    expect(BLOCKED_V4).toContain('100.64.0.0/10');
  });
});
