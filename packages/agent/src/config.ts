import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { z } from 'zod';

/**
 * Every setting of `orch-agent`, declared once: flag, environment variable, default and
 * description. This module is the only place in the program that reads `process.env` (it is passed in).
 */
interface OptionSpec {
  readonly key: keyof RawConfig;
  readonly flag?: string;
  readonly env: string;
  readonly default?: string;
  readonly secret?: boolean;
  readonly description: string;
}

interface RawConfig {
  port: string;
  listen: string;
  microvmToken: string;
  gpuToken: string;
  dataDir: string;
  accel: string;
  id: string;
  qemu: string;
  bootTimeoutS: string;
  logLevel: string;
}

export const OPTIONS: readonly OptionSpec[] = [
  {
    key: 'port',
    flag: 'port',
    env: 'AGENT_PORT',
    default: '9090',
    description: 'TCP port of the agent API (0 picks a free one)',
  },
  {
    key: 'listen',
    flag: 'listen',
    env: 'AGENT_LISTEN',
    default: '127.0.0.1',
    description: "address the API and the VMs' forwarded ports bind to (0.0.0.0 for all)",
  },
  {
    key: 'microvmToken',
    env: 'MICROVM_AGENT_TOKEN',
    default: '',
    secret: true,
    description: 'bearer token of a microvm host (this agent then reports kind "microvm")',
  },
  {
    key: 'gpuToken',
    env: 'GPU_AGENT_TOKEN',
    default: '',
    secret: true,
    description: 'bearer token of a GPU host (kind "gpu"); set exactly one of the two tokens',
  },
  {
    key: 'dataDir',
    flag: 'data-dir',
    env: 'AGENT_DATA_DIR',
    default: '.data/orch-agent',
    description: 'kernel, images, VM disks and snapshots',
  },
  {
    key: 'accel',
    flag: 'accel',
    env: 'AGENT_ACCEL',
    default: 'auto',
    description: 'auto (KVM if a real probe boot works, else TCG), kvm or tcg',
  },
  {
    key: 'id',
    flag: 'id',
    env: 'AGENT_ID',
    default: '',
    description: 'agent id reported in /v1/info (default: host name)',
  },
  {
    key: 'qemu',
    env: 'AGENT_QEMU',
    default: 'qemu-system-x86_64',
    description: 'QEMU system emulator to run',
  },
  {
    key: 'bootTimeoutS',
    env: 'AGENT_BOOT_TIMEOUT',
    default: '120',
    description: 'seconds a VM may take from QEMU start to guest agent ready before it is an error',
  },
  {
    key: 'logLevel',
    env: 'AGENT_LOG_LEVEL',
    default: 'info',
    description: 'log level: fatal, error, warn, info, debug, trace, silent',
  },
];

const Schema = z.object({
  port: z.coerce.number().int().min(0).max(65_535),
  listen: z.string().min(1),
  microvmToken: z.string(),
  gpuToken: z.string(),
  dataDir: z.string().min(1),
  accel: z.enum(['auto', 'kvm', 'tcg']),
  id: z.string(),
  qemu: z.string().min(1),
  bootTimeoutS: z.coerce.number().int().min(5).max(3600),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
});

type Parsed = z.infer<typeof Schema>;

/** The validated settings of the agent server. */
export interface Config extends Omit<Parsed, 'microvmToken' | 'gpuToken'> {
  /** The one bearer token every request must carry. */
  readonly token: string;
  readonly kind: 'microvm' | 'gpu';
}

/** Settings of `orch-agent setup` and `orch-agent image import`: only where the data lives. */
export interface SetupConfig {
  readonly dataDir: string;
  readonly qemu: string;
}

/** Raised for a configuration the agent refuses to start with; `problems` are one sentence each. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** What the command line asks for. */
export type Invocation =
  | { readonly command: 'help' }
  | { readonly command: 'serve'; readonly config: Config }
  | { readonly command: 'setup'; readonly config: SetupConfig }
  | {
      readonly command: 'image-import';
      readonly config: SetupConfig;
      readonly name: string;
      readonly tarball: string;
    };

/**
 * Reads flags (which win) and environment variables, validates everything, and reports all
 * problems at once. `orch-agent` serves; `orch-agent setup` prepares kernel and images;
 * `orch-agent image import NAME TARBALL` adds an image.
 */
export function loadConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): Invocation {
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: true,
      options: {
        help: { type: 'boolean', short: 'h' },
        ...Object.fromEntries(
          OPTIONS.filter((o) => o.flag).map((o) => [o.flag!, { type: 'string' as const }]),
        ),
      },
    }));
  } catch (err) {
    throw new ConfigError([`${(err as Error).message}; see orch-agent --help`]);
  }
  if (values.help) return { command: 'help' };
  const raw = Object.fromEntries(
    OPTIONS.map((o) => {
      const fromFlag = o.flag ? values[o.flag] : undefined;
      return [o.key, typeof fromFlag === 'string' ? fromFlag : (env[o.env] ?? o.default ?? '')];
    }),
  ) as unknown as RawConfig;
  const parsed = Schema.safeParse(raw);
  const problems = parsed.success
    ? []
    : parsed.error.issues.map((i) => {
        const option = OPTIONS.find((o) => o.key === i.path[0]);
        return option ? `${option.env}${option.flag ? ` (--${option.flag})` : ''}: ${i.message}` : i.message;
      });
  const [command, ...rest] = positionals;
  if (command === 'setup' || command === 'image') {
    if (command === 'setup' && rest.length > 0) problems.push(`unexpected arguments: ${rest.join(' ')}`);
    if (command === 'image' && (rest[0] !== 'import' || rest.length !== 3)) {
      problems.push('usage: orch-agent image import NAME ROOTFS.tar[.gz]');
    }
    if (problems.length > 0 || !parsed.success) throw new ConfigError(problems);
    const config = { dataDir: parsed.data.dataDir, qemu: parsed.data.qemu };
    return command === 'setup'
      ? { command: 'setup', config }
      : { command: 'image-import', config, name: rest[1]!, tarball: rest[2]! };
  }
  if (command !== undefined)
    problems.push(`unknown command ${JSON.stringify(command)}; see orch-agent --help`);
  if (raw.microvmToken === '' && raw.gpuToken === '') {
    problems.push(
      'a bearer token is required: set MICROVM_AGENT_TOKEN (microvm host) or GPU_AGENT_TOKEN (GPU host)',
    );
  } else if (raw.microvmToken !== '' && raw.gpuToken !== '') {
    problems.push(
      'set only one of MICROVM_AGENT_TOKEN and GPU_AGENT_TOKEN: an agent serves one kind of host',
    );
  }
  const id =
    raw.id ||
    hostname()
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .slice(0, 63) ||
    'agent';
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(id)) {
    problems.push(
      `AGENT_ID (--id): ${JSON.stringify(id)} must be letters, digits, '.', '_' or '-' (at most 63)`,
    );
  }
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);
  const { microvmToken, gpuToken, ...rest2 } = parsed.data;
  return {
    command: 'serve',
    config: {
      ...rest2,
      id,
      token: microvmToken || gpuToken,
      kind: microvmToken ? 'microvm' : 'gpu',
    },
  };
}

/** `orch-agent --help`: commands and every option with its flag, variable and default. */
export function helpText(): string {
  const rows = OPTIONS.map((o) => [
    [o.flag ? `--${o.flag}` : '', o.env].filter(Boolean).join(', '),
    `${o.description}${o.default && !o.secret ? ` (default: ${o.default})` : ''}`,
  ]);
  const width = Math.max(...rows.map(([a]) => a!.length));
  return [
    'Usage: orch-agent [options]                          serve the agent API',
    '       orch-agent setup [--data-dir DIR]             fetch the kernel, build the initramfs and images',
    '       orch-agent image import NAME ROOTFS.tar[.gz]  add an image from a root filesystem tarball',
    '',
    'The host agent: runs environments as QEMU microVMs. Flags win over environment variables.',
    '',
    ...rows.map(([a, b]) => `  ${a!.padEnd(width)}  ${b}`),
    `  ${'-h, --help'.padEnd(width)}  show this help`,
    '',
  ].join('\n');
}
