import { BlockList, isIPv4, isIPv6 } from 'node:net';

/**
 * The client allowlist (`ORCH_ALLOWED_CIDRS`). Empty allows everyone. IPv4-mapped IPv6 addresses
 * (`::ffff:10.1.2.3`) are checked as the IPv4 address they carry. Only the socket's peer address
 * counts: forwarding headers are not trusted.
 */
export class CidrAllowlist {
  private readonly list = new BlockList();
  readonly empty: boolean;

  constructor(cidrs: readonly string[]) {
    this.empty = cidrs.length === 0;
    for (const cidr of cidrs) {
      const [address, prefix] = cidr.split('/');
      const type = isIPv4(address!) ? 'ipv4' : isIPv6(address!) ? 'ipv6' : undefined;
      if (!type) throw new Error(`ORCH_ALLOWED_CIDRS entry ${JSON.stringify(cidr)} has no valid address`);
      const bits = Number(prefix);
      if (bits > (type === 'ipv4' ? 32 : 128))
        throw new Error(`ORCH_ALLOWED_CIDRS entry ${JSON.stringify(cidr)} has a bad prefix`);
      this.list.addSubnet(address!, bits, type);
    }
  }

  allows(address: string | undefined): boolean {
    if (this.empty) return true;
    if (!address) return false;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    const ip = mapped ? mapped[1]! : address;
    return this.list.check(ip, isIPv4(ip) ? 'ipv4' : 'ipv6');
  }
}
