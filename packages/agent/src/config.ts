import { hostname } from 'node:os';
import { resolve } from 'node:path';
import {
  declareOptions,
  listenOptions,
  loadOptions,
  logLevelOption,
  type OptionValues,
  type RawOptions as RawOptionsOf,
  secondsSchema,
} from '@support/server';
import { z } from 'zod';
import { type Cidr, isLoopbackCidr, parseCidr } from './net/egress-rules.js';

export { ConfigError } from '@support/server';

/**
 * Every setting of `orch-agent`, declared once: environment variable, flag, default (in the
 * schema) and description. This module is the only place in the program that reads `process.env`
 * (it is passed in). The bearer tokens are read from the environment only.
 */
const listen = listenOptions('AGENT', 9090, ['AGENT_LISTEN']);

export const OPTIONS = declareOptions({
  port: listen.port,
  host: {
    ...listen.host,
    description:
      "address the API and the VMs' forwarded ports bind to (0.0.0.0 for all; AGENT_LISTEN is read too)",
  },
  microvmToken: {
    env: 'MICROVM_AGENT_TOKEN',
    schema: z.string().default(''),
    secret: true,
    description: 'bearer token of a microvm host (this agent then reports kind "microvm")',
  },
  gpuToken: {
    env: 'GPU_AGENT_TOKEN',
    schema: z.string().default(''),
    secret: true,
    description: 'bearer token of a GPU host (kind "gpu"); set exactly one of the two tokens',
  },
  dataDir: {
    env: 'AGENT_DATA_DIR',
    flag: '--data-dir <dir>',
    schema: z.string().min(1).default('.data/orch-agent'),
    description: 'kernel, images, VM disks and snapshots',
  },
  accel: {
    env: 'AGENT_ACCEL',
    flag: '--accel <auto|kvm|tcg>',
    schema: z.enum(['auto', 'kvm', 'tcg']).default('auto'),
    description: 'auto (KVM if a real probe boot works, else TCG), kvm or tcg',
  },
  id: {
    env: 'AGENT_ID',
    flag: '--id <id>',
    schema: z.string().default(''),
    description: 'agent id reported in /v1/info (default: host name)',
  },
  qemu: {
    env: 'AGENT_QEMU',
    flag: '--qemu <path>',
    schema: z.string().min(1).default('qemu-system-x86_64'),
    description: 'QEMU system emulator to run',
  },
  bootTimeoutSec: {
    env: 'AGENT_BOOT_TIMEOUT_SEC',
    envAliases: ['AGENT_BOOT_TIMEOUT'],
    flag: '--boot-timeout-sec <s>',
    schema: secondsSchema(120, { min: 5, max: 3600 }),
    description: 'seconds a VM may take from QEMU start to guest agent ready before it is an error',
  },
  logLevel: logLevelOption('AGENT_LOG_LEVEL'),
  nvidiaSmi: {
    env: 'AGENT_NVIDIA_SMI',
    flag: '--nvidia-smi <path>',
    schema: z.string().min(1).default('nvidia-smi'),
    description: 'GPU hosts: the nvidia-smi program GPU detection runs (looked up on PATH)',
  },
  sysfsRoot: {
    env: 'AGENT_SYSFS_ROOT',
    flag: '--sysfs-root <dir>',
    schema: z.string().min(1).default('/sys'),
    description: 'GPU hosts: where sysfs is mounted (PCI devices, IOMMU groups, vfio-pci binding)',
  },
  isolation: {
    env: 'AGENT_ISOLATION',
    flag: '--isolation <on|off>',
    schema: z.enum(['on', 'off']).default('on'),
    description:
      'on: each VM runs as its own uid and guests cannot reach this host, link-local or private addresses (creates are refused when the rules cannot be installed); off is UNSAFE: guests reach every service of the host',
  },
  vmUids: {
    env: 'AGENT_VM_UIDS',
    flag: '--vm-uids <first-last>',
    schema: z
      .string()
      .default('900000-900999')
      .transform((v, ctx) => {
        const m = /^(\d{1,10})-(\d{1,10})$/.exec(v.trim());
        const first = Number(m?.[1]);
        const last = Number(m?.[2]);
        if (!m || first < 1000 || last < first || last > 4_294_967_294) {
          ctx.addIssue({
            code: 'custom',
            message: 'must be FIRST-LAST uids, 1000 <= FIRST <= LAST < 2^32-1',
          });
          return z.NEVER;
        }
        return { first, last };
      }),
    description:
      'uids the VMs run as (one per VM, none used by anything else on this host); isolation on only',
  },
  egressInternet: {
    env: 'AGENT_EGRESS_INTERNET',
    flag: '--egress-internet <allow|deny>',
    schema: z.enum(['allow', 'deny']).default('allow'),
    description: 'whether guests may reach public addresses (DNS to the host resolvers is always allowed)',
  },
  egressAllow: {
    env: 'AGENT_EGRESS_ALLOW',
    flag: '--egress-allow <cidrs>',
    schema: cidrList(true),
    description:
      'comma-separated CIDRs guests may reach although private or link-local (never an address of this host)',
  },
  egressDeny: {
    env: 'AGENT_EGRESS_DENY',
    flag: '--egress-deny <cidrs>',
    schema: cidrList(false),
    description: 'comma-separated CIDRs guests may never reach (wins over the allow list)',
  },
  startupLogMb: {
    env: 'AGENT_STARTUP_LOG_MB',
    flag: '--startup-log-mb <n>',
    schema: z.coerce.number().int().min(1).max(1024).default(8),
    description: "MiB of a VM's startup log kept on disk (two rotated halves; offsets stay absolute)",
  },
  exportRoots: {
    env: 'AGENT_EXPORT_ROOTS',
    flag: '--export-roots <dirs>',
    schema: z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((d) => d.trim())
          .filter(Boolean),
      )
      .pipe(
        z.array(
          z.string().refine((d) => d === 'none' || d.startsWith('/'), 'each root must be an absolute path'),
        ),
      ),
    description:
      'exports: comma-separated absolute directories file:// destinations must lie under (default: <data dir>/exports; none: no file:// exports)',
  },
  s3Endpoint: {
    env: 'AGENT_S3_ENDPOINT',
    schema: z
      .string()
      .default('')
      .refine(
        (v) => v === '' || /^https?:\/\/[^/?#@]+\/?$/.test(v),
        'must be http(s)://host[:port] (no path, no credentials)',
      ),
    description: 'exports: endpoint of the S3-compatible storage of s3:// destinations (empty: AWS)',
  },
  s3Region: {
    env: 'AGENT_S3_REGION',
    schema: z.string().min(1).default('us-east-1'),
    description: 'exports: S3 region',
  },
  s3AccessKeyId: {
    env: 'AGENT_S3_ACCESS_KEY_ID',
    schema: z.string().default(''),
    secret: true,
    description: 'exports: S3 access key id (never logged or returned)',
  },
  s3SecretAccessKey: {
    env: 'AGENT_S3_SECRET_ACCESS_KEY',
    schema: z.string().default(''),
    secret: true,
    description: 'exports: S3 secret access key (never logged or returned)',
  },
  s3ForcePathStyle: {
    env: 'AGENT_S3_FORCE_PATH_STYLE',
    schema: z
      .enum(['true', 'false'])
      .default('true')
      .transform((v) => v === 'true'),
    description: 'exports: path-style S3 URLs (endpoint/bucket/key), which most S3-compatible servers need',
  },
  s3PartSizeMb: {
    env: 'AGENT_S3_PART_SIZE_MB',
    schema: z.coerce.number().int().min(5).max(5120).default(16),
    description: 'exports: multipart upload part size in MiB (files larger than one part go multipart)',
  },
});

/** A comma-separated CIDR list; an allow list may not name the host's loopback. */
function cidrList(allow: boolean) {
  return z
    .string()
    .default('')
    .transform((v, ctx): Cidr[] => {
      const out: Cidr[] = [];
      for (const item of v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)) {
        const cidr = parseCidr(item);
        if (!cidr) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(item)} is not a CIDR` });
        else if (allow && isLoopbackCidr(cidr))
          ctx.addIssue({
            code: 'custom',
            message: `${JSON.stringify(item)} is this host's loopback: guests never reach the host itself`,
          });
        else out.push(cidr);
      }
      return out;
    });
}

/** Images `orch-agent setup` can build (`AGENT_IMAGES`). */
export const SETUP_IMAGES = ['busybox', 'debian-12'] as const;

/** The options `orch-agent setup` takes: where the data lives and which images to build. */
export const SETUP_OPTIONS = declareOptions({
  dataDir: OPTIONS.dataDir,
  qemu: OPTIONS.qemu,
  images: {
    env: 'AGENT_IMAGES',
    flag: '--images <list>',
    schema: z
      .string()
      .default(SETUP_IMAGES.join(','))
      .transform((v) =>
        v
          .split(',')
          .map((i) => i.trim())
          .filter(Boolean),
      )
      .pipe(z.array(z.enum(SETUP_IMAGES)).min(1, 'name at least one image')),
    description: `images setup builds, comma-separated: ${SETUP_IMAGES.join(', ')}`,
  },
});

/** The options of `orch-agent image import|pull`: where the data lives and how registries are reached. */
export const IMAGE_OPTIONS = declareOptions({
  dataDir: OPTIONS.dataDir,
  qemu: OPTIONS.qemu,
  registryCredentials: {
    env: 'AGENT_REGISTRY_CREDENTIALS',
    schema: z
      .string()
      .default('')
      .refine((v) => v === '' || /^[^:]+:.+$/s.test(v), 'must be USER:PASSWORD'),
    secret: true,
    description: 'image pull: USER:PASSWORD for the registry (never logged; given to skopeo in a 0600 file)',
  },
  registryTlsVerify: {
    env: 'AGENT_REGISTRY_TLS_VERIFY',
    schema: z
      .enum(['true', 'false'])
      .default('true')
      .transform((v) => v === 'true'),
    description: "image pull: verify the registry's TLS certificate (false also allows plain http)",
  },
  registryCertDir: {
    env: 'AGENT_REGISTRY_CERT_DIR',
    schema: z.string().default(''),
    description: 'image pull: directory of extra CA certificates (*.crt) for the registry',
  },
});

type Parsed = OptionValues<typeof OPTIONS>;
/** Raw option values from the command line (they win over the environment). */
export type RawOptions = RawOptionsOf<typeof OPTIONS>;

/** The validated settings of the agent server. */
export interface Config extends Omit<Parsed, 'microvmToken' | 'gpuToken' | 'exportRoots'> {
  /** Absolute directories `file://` destinations must lie under; empty: none allowed. */
  readonly exportRoots: readonly string[];
  /** The one bearer token every request must carry. */
  readonly token: string;
  readonly kind: 'microvm' | 'gpu';
}

/** Settings of `orch-agent setup`. */
export type SetupConfig = OptionValues<typeof SETUP_OPTIONS>;

/** How `orch-agent image pull` reaches registries. */
export interface RegistryConfig {
  /** `USER:PASSWORD`, or '' for anonymous pulls. A secret: never logged, never on a command line. */
  readonly credentials: string;
  readonly tlsVerify: boolean;
  /** Directory of extra CA certificates, or ''. */
  readonly certDir: string;
}

/** Settings of `orch-agent image import|pull`. */
export interface ImageConfig {
  readonly dataDir: string;
  readonly registry: RegistryConfig;
}

/**
 * Reads the server's flags (which win) and environment variables, validates everything, and
 * throws one `ConfigError` naming every problem.
 */
export function loadConfig(fromFlags: RawOptions, env: Readonly<Record<string, string | undefined>>): Config {
  const defaultId =
    hostname()
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .slice(0, 63) || 'agent';
  const parsed = loadOptions(OPTIONS, { flags: fromFlags, env }, (v, problem, raw) => {
    const microvm = raw.microvmToken ?? '';
    const gpu = raw.gpuToken ?? '';
    if (microvm === '' && gpu === '') {
      problem(
        ['microvmToken', 'gpuToken'],
        'a bearer token is required: set MICROVM_AGENT_TOKEN (microvm host) or GPU_AGENT_TOKEN (GPU host)',
      );
    } else if (microvm !== '' && gpu !== '') {
      problem(
        ['microvmToken', 'gpuToken'],
        'set only one of MICROVM_AGENT_TOKEN and GPU_AGENT_TOKEN: an agent serves one kind of host',
      );
    }
    if (v.exportRoots?.includes('none') && v.exportRoots.length > 1)
      problem('exportRoots', '"none" cannot be combined with directories');
    const id = v.id || defaultId;
    if (v.id !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(id)) {
      problem('id', `${JSON.stringify(id)} must be letters, digits, '.', '_' or '-' (at most 63)`);
    }
  });
  const { microvmToken, gpuToken, exportRoots, ...rest } = parsed;
  return {
    ...rest,
    exportRoots:
      exportRoots.length === 0
        ? [resolve(parsed.dataDir, 'exports')]
        : exportRoots.filter((r) => r !== 'none').map((r) => resolve(r)),
    id: parsed.id || defaultId,
    token: microvmToken || gpuToken,
    kind: microvmToken ? 'microvm' : 'gpu',
  };
}

/** Reads the options of `orch-agent setup`. */
export function loadSetupConfig(
  fromFlags: RawOptionsOf<typeof SETUP_OPTIONS>,
  env: Readonly<Record<string, string | undefined>>,
): SetupConfig {
  return loadOptions(SETUP_OPTIONS, { flags: fromFlags, env });
}

/** Reads the options of `orch-agent image import|pull`. */
export function loadImageConfig(
  fromFlags: RawOptionsOf<typeof IMAGE_OPTIONS>,
  env: Readonly<Record<string, string | undefined>>,
): ImageConfig {
  const v = loadOptions(IMAGE_OPTIONS, { flags: fromFlags, env });
  return {
    dataDir: v.dataDir,
    registry: {
      credentials: v.registryCredentials,
      tlsVerify: v.registryTlsVerify,
      certDir: v.registryCertDir,
    },
  };
}
