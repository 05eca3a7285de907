import {
  type ManifestService,
  manifestServices,
  OrchError,
  SERVICE_STATES,
  type ServiceStatus,
} from '@orch/protocol';
import { AgentError } from '../errors.js';
import type { ImageConfig, ImageStore } from '../images/image-store.js';
import type { Layout } from '../images/layout.js';
import { run } from '../util/run.js';

/**
 * Manifest services on the host side (README "Services"): which image disks a VM gets, the OCI
 * runtime config of each service (built here, secrets included, and sent to the guest over the
 * guest channel: never written on the host), and the guest scripts' answers read back.
 */

/** A service ready to boot: its image file (a read-only disk of the VM) and its runtime config. */
export interface PreparedService {
  readonly service: ManifestService;
  readonly imageFile: string;
  /** The OCI runtime config (holds secret values: memory and the guest's tmpfs only). */
  readonly config: object;
}

/** Where the guest mounts a service's root filesystem (guest-services.ts). */
export const guestServiceRoot = (name: string) => `/run/orch/svc/${name}/rootfs`;
/** The serial of the i-th service disk: how the guest finds it whatever its device name. */
export const serviceDiskSerial = (i: number) => `svc${i}`;

const DEFAULT_PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Docker's default capability set: a service that starts as root and drops privileges works. */
const CAPABILITIES = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FSETID',
  'CAP_FOWNER',
  'CAP_MKNOD',
  'CAP_NET_RAW',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETFCAP',
  'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE',
  'CAP_SYS_CHROOT',
  'CAP_KILL',
  'CAP_AUDIT_WRITE',
];

/**
 * The services of a create request, checked and prepared: every image exists on this host (else
 * `400 invalid_argument` naming image and service, with the images it has), has an Entrypoint or
 * Cmd, and every secret a service names has a value.
 */
export async function prepareServices(
  layout: Layout,
  images: ImageStore,
  manifestJson: string,
  secrets: Readonly<Record<string, string>>,
): Promise<PreparedService[]> {
  let services: ManifestService[];
  try {
    services = manifestServices(manifestJson);
  } catch (err) {
    if (err instanceof OrchError) throw AgentError.invalid(err.message, err.details);
    throw err;
  }
  const prepared: PreparedService[] = [];
  for (const service of services) {
    const meta = await images.meta(service.imageName).catch(() => undefined);
    if (!meta) {
      throw AgentError.invalid(
        `service ${service.name}: image ${JSON.stringify(service.image)} (${service.imageName}) is not on this host`,
        { service: service.name, image: service.image, available: await images.list() },
      );
    }
    const config = meta.config ?? {};
    const args = [...(config.Entrypoint ?? []), ...(config.Cmd ?? [])];
    if (args.length === 0) {
      throw AgentError.invalid(
        `service ${service.name}: image ${service.imageName} has no Entrypoint or Cmd to run`,
        { service: service.name, image: service.image },
      );
    }
    const env = new Map<string, string>();
    for (const e of config.Env ?? []) {
      const eq = e.indexOf('=');
      if (eq > 0) env.set(e.slice(0, eq), e.slice(eq + 1));
    }
    if (!env.has('PATH')) env.set('PATH', DEFAULT_PATH.slice(5));
    for (const e of service.env) if (e.value !== undefined) env.set(e.name, e.value);
    for (const e of service.env) {
      if (e.secret === undefined) continue;
      const value = secrets[e.secret];
      if (value === undefined) {
        throw AgentError.invalid(
          `service ${service.name}: env ${e.name} needs secret ${e.secret}, which has no value`,
          {
            service: service.name,
            secret: e.secret,
          },
        );
      }
      env.set(e.name, value);
    }
    const imageFile = layout.imageFile(service.imageName);
    const user = await resolveUser(imageFile, config);
    prepared.push({
      service,
      imageFile,
      config: runtimeConfig(
        service.name,
        args,
        [...env].map(([k, v]) => `${k}=${v}`),
        user,
        config,
      ),
    });
  }
  return prepared;
}

/** The OCI runtime config of one service: own mount, PID and IPC namespaces; the guest's network. */
function runtimeConfig(
  name: string,
  args: string[],
  env: string[],
  user: { uid: number; gid: number },
  image: ImageConfig,
): object {
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user,
      args,
      env,
      cwd: image.WorkingDir || '/',
      capabilities: {
        bounding: CAPABILITIES,
        effective: CAPABILITIES,
        permitted: CAPABILITIES,
      },
      rlimits: [{ type: 'RLIMIT_NOFILE', hard: 1_048_576, soft: 1_048_576 }],
      noNewPrivileges: true,
    },
    root: { path: guestServiceRoot(name), readonly: false },
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      {
        destination: '/dev',
        type: 'tmpfs',
        source: 'tmpfs',
        options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'],
      },
      {
        destination: '/dev/pts',
        type: 'devpts',
        source: 'devpts',
        options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'],
      },
      {
        destination: '/dev/shm',
        type: 'tmpfs',
        source: 'shm',
        options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'],
      },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777'] },
      // The guest's network namespace is shared: its resolver and hosts file too.
      { destination: '/etc/resolv.conf', type: 'bind', source: '/etc/resolv.conf', options: ['rbind', 'ro'] },
      { destination: '/etc/hosts', type: 'bind', source: '/etc/hosts', options: ['rbind', 'ro'] },
    ],
    linux: {
      namespaces: [{ type: 'pid' }, { type: 'mount' }, { type: 'ipc' }],
      maskedPaths: ['/proc/kcore', '/proc/keys', '/proc/timer_list', '/sys/firmware'],
      readonlyPaths: ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'],
    },
  };
}

/**
 * The image's `User` (`uid`, `uid:gid`, `name`, `name:group`; empty = root) as numbers, names looked
 * up in the image's own `/etc/passwd` and `/etc/group` (read from its ext4 file with `debugfs`, no
 * mount). A name the image does not know is a `400`.
 */
async function resolveUser(imageFile: string, config: ImageConfig): Promise<{ uid: number; gid: number }> {
  const spec = (config.User ?? '').trim();
  if (spec === '') return { uid: 0, gid: 0 };
  const [u = '', g] = spec.split(':');
  const numeric = (s: string) => /^\d+$/.test(s);
  const table = async (file: string) =>
    (await run(['debugfs', '-R', `cat ${file}`, imageFile]).catch(() => ''))
      .split('\n')
      .map((l) => l.split(':'))
      .filter((f) => f.length >= 3);
  const passwd = numeric(u) && (g === undefined || numeric(g)) ? [] : await table('/etc/passwd');
  let uid: number;
  let gid = 0;
  if (numeric(u)) {
    uid = Number(u);
    const entry = passwd.find((f) => f[2] === u);
    if (entry) gid = Number(entry[3]);
  } else {
    const entry = passwd.find((f) => f[0] === u);
    if (!entry) throw AgentError.invalid(`image user ${JSON.stringify(u)} is not in the image's /etc/passwd`);
    uid = Number(entry[2]);
    gid = Number(entry[3]);
  }
  if (g !== undefined) {
    if (numeric(g)) gid = Number(g);
    else {
      const entry = (await table('/etc/group')).find((f) => f[0] === g);
      if (!entry)
        throw AgentError.invalid(`image group ${JSON.stringify(g)} is not in the image's /etc/group`);
      gid = Number(entry[2]);
    }
  }
  return { uid, gid };
}

/** The services' part of the guest's startup request: `NAME DISK_SERIAL CONFIG_JSON_B64` lines. */
export function servicesStartupField(services: readonly PreparedService[]): string {
  return services
    .map(
      (s, i) =>
        `${s.service.name} ${serviceDiskSerial(i)} ${Buffer.from(JSON.stringify(s.config)).toString('base64')}\n`,
    )
    .join('');
}

/** The statuses a VM reports before the guest said anything. */
export function initialStatuses(services: readonly ManifestService[]): ServiceStatus[] {
  return services.map((s) => ({
    name: s.name,
    image: s.image,
    state: 'starting',
    restarts: 0,
    ports: [...s.ports],
  }));
}

/** `previous` updated with the guest's status lines (`NAME STATE RESTARTS EXIT|-`, SERVICE_STATUS_SCRIPT). */
export function parseServiceStatus(previous: readonly ServiceStatus[], output: string): ServiceStatus[] {
  const lines = new Map<string, string[]>();
  for (const line of output.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 4 && f[0]) lines.set(f[0], f);
  }
  return previous.map((s) => {
    const f = lines.get(s.name);
    if (!f) return s;
    const state = (SERVICE_STATES as readonly string[]).includes(f[1]!)
      ? (f[1] as ServiceStatus['state'])
      : 'unknown';
    const { exit_code: _previous, ...rest } = s;
    return {
      ...rest,
      state,
      restarts: Number(f[2]) || 0,
      ...(f[3] !== '-' && /^-?\d+$/.test(f[3]!) ? { exit_code: Number(f[3]) } : {}),
    };
  });
}

/**
 * The guest script that prints a window of a service's log (guest-services.ts keeps `prev`,
 * `current` and `base`): a first line `START SIZE`, then the bytes `[START, START + length)`.
 * Offsets are absolute bytes since the service first started; what rotation dropped is gone, so a
 * window never starts before the oldest byte kept.
 */
export function serviceLogScript(
  name: string,
  window: { offset?: number | undefined; tail?: number | undefined },
  limit: number,
): string {
  const d = `/run/orch/svc/${name}/log`;
  const want =
    window.tail !== undefined
      ? `start=$((size - ${window.tail}))`
      : `start=${window.offset ?? 0}; [ "$start" -gt "$size" ] && start=$size`;
  return `B=/orch/bin/busybox
d=${d}
base=$($B cat $d/base 2>/dev/null || echo 0)
p=$($B stat -c %s $d/prev 2>/dev/null || echo 0)
c=$($B stat -c %s $d/current 2>/dev/null || echo 0)
size=$((base + p + c))
${want}
[ "$start" -lt "$base" ] && start=$base
echo "$start $size"
$B cat $d/prev $d/current 2>/dev/null | $B tail -c +$((start - base + 1)) | $B head -c ${limit}
`;
}
