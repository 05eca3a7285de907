import { chmod, mkdir, readFile, stat } from 'node:fs/promises';
import type { Logger } from 'pino';
import { AgentError } from '../errors.js';
import { run, which } from '../util/run.js';
import { type Cidr, type EgressPolicy, egressRuleset, egressTableName, resolversOf } from './egress-rules.js';

/** What the agent's configuration says about isolation (config.ts). */
export interface IsolationConfig {
  readonly isolation: 'on' | 'off';
  readonly vmUids: { readonly first: number; readonly last: number };
  readonly egressInternet: 'allow' | 'deny';
  readonly egressAllow: readonly Cidr[];
  readonly egressDeny: readonly Cidr[];
}

/**
 * Whether guests are isolated from this host (`/v1/info` `network_isolation`): `on` and `active`
 * once the rules are installed; `on` but not active (creates refused, `reason` says why) when they
 * could not be; `off` when the operator turned it off.
 */
export interface IsolationStatus {
  readonly mode: 'on' | 'off';
  readonly active: boolean;
  readonly reason?: string;
  /** The nftables table holding the rules (when active). */
  readonly table?: string;
}

/** The identity a VM's QEMU runs as: its own uid and group, plus `kvm` when it opens /dev/kvm. */
export interface VmUser {
  readonly uid: number;
  readonly gid: number;
  readonly groups: readonly number[];
}

/**
 * Installs (or replaces, atomically) the agent's nftables table for `config` and makes the data
 * dir's VM directory reachable by the VM uids. Never throws: a failure is a status that is not
 * active, with the reason, and the agent then refuses creates ({@link requireIsolation}).
 */
export async function installIsolation(
  config: IsolationConfig,
  dirs: { readonly root: string; readonly vmsDir: string },
  logger: Logger,
  resolvConf = '/etc/resolv.conf',
): Promise<IsolationStatus> {
  if (config.isolation === 'off') {
    logger.warn(
      'network isolation is OFF (AGENT_ISOLATION=off): guests can reach every service of this host',
    );
    return { mode: 'off', active: false, reason: 'turned off by the operator (AGENT_ISOLATION=off)' };
  }
  const refuse = (reason: string): IsolationStatus => {
    logger.error({ reason }, 'network isolation unavailable: VM creates are refused');
    return { mode: 'on', active: false, reason };
  };
  if (process.getuid?.() !== 0)
    return refuse('orch-agent is not root: it cannot run VMs as their own uid nor install nftables rules');
  for (const tool of ['nft', 'setpriv']) {
    if (!(await which(tool)))
      return refuse(
        `${tool} is not installed (Debian packages nftables and util-linux; scripts/setup.sh installs them)`,
      );
  }
  const policy: EgressPolicy = {
    uids: config.vmUids,
    internet: config.egressInternet === 'allow',
    allow: config.egressAllow,
    deny: config.egressDeny,
    resolvers: resolversOf(await readFile(resolvConf, 'utf8').catch(() => '')),
  };
  try {
    await run(['nft', '-f', '-'], { input: egressRuleset(policy) });
  } catch (err) {
    return refuse(`nft could not install the egress rules: ${(err as Error).message.slice(-500)}`);
  }
  // The VM uids create their sockets in vms/<id>/: the data dir and vms/ must be searchable.
  for (const dir of [dirs.root, dirs.vmsDir]) {
    await mkdir(dir, { recursive: true });
    const mode = (await stat(dir)).mode & 0o7777;
    if ((mode & 0o001) === 0) await chmod(dir, mode | 0o001);
  }
  const probe = await run([
    'setpriv',
    `--reuid=${config.vmUids.first}`,
    `--regid=${config.vmUids.first}`,
    '--clear-groups',
    '--',
    'test',
    '-x',
    dirs.vmsDir,
  ]).then(
    () => true,
    () => false,
  );
  if (!probe)
    return refuse(
      `the VM uids cannot reach ${dirs.vmsDir}: every directory above it must be searchable by others (chmod o+x)`,
    );
  const table = egressTableName(policy);
  logger.info(
    {
      table,
      uids: `${policy.uids.first}-${policy.uids.last}`,
      internet: policy.internet,
      resolvers: policy.resolvers,
    },
    'network isolation on',
  );
  return { mode: 'on', active: true, table };
}

/** Throws the create refusal (503 `isolation_unavailable`) when isolation is on but not active. */
export function requireIsolation(status: IsolationStatus): void {
  if (status.mode === 'off' || status.active) return;
  throw AgentError.unavailable(
    `network isolation is on but unavailable, so no VM is started: ${status.reason ?? 'unknown reason'} (AGENT_ISOLATION=off runs guests without it: unsafe)`,
    { reason: 'isolation_unavailable' },
  );
}
