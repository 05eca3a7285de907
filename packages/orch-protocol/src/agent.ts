import { z } from 'zod';
import { AgentGpuDevice, AgentGpuStatus } from './gpu.js';
import { HOST_ID, HOST_ID_RULE, text } from './text.js';

/**
 * The host-agent protocol (HTTP + JSON, `Authorization: Bearer <agent token>` on every request,
 * never a redirect). See this package's README. `orchd` dials these paths below the registered
 * agent URL.
 */
export const AGENT_PATHS = {
  /** `GET`: who the agent is and what it can run ({@link AgentInfo}). */
  info: '/v1/info',
} as const;

export const HOST_KINDS = ['microvm', 'gpu'] as const;
export type HostKind = (typeof HOST_KINDS)[number];

export const ARCHES = ['amd64', 'arm64'] as const;
export type Arch = (typeof ARCHES)[number];

const count = z.number().int().nonnegative();

/** Whole cpus, MiB of RAM and GiB of disk. */
export const Resources = z.object({ cpus: count, ram_mb: count, disk_gb: count }).meta({ id: 'Resources' });
export type Resources = z.infer<typeof Resources>;

/**
 * A GPU model on a host (summary of `gpu_devices`): whole GPUs of that model that can be passed
 * through (`count`; MIG-enabled ones excluded), how many no VM holds (`free`), and the MIG profiles
 * its MIG-enabled GPUs offer.
 */
export const AgentGpu = z
  .object({
    model: text(128, 1),
    count: count,
    free: count,
    mig_profiles: z.array(text(64)).max(256).default([]),
  })
  .meta({ id: 'AgentGpu' });
export type AgentGpu = z.infer<typeof AgentGpu>;

/** One image a host can boot, as `GET /v1/info` lists it in `image_details`. */
export const AgentImage = z
  .object({
    name: text(256),
    /** Size of the image's root filesystem file in bytes. */
    size_bytes: z.number().int().nonnegative(),
    /** `sha256:<hex>` of the root filesystem file, or null for an image built before digests were recorded. */
    digest: text(128).nullable().default(null),
    /** Where it came from: `busybox`, `mmdebstrap:bookworm`, `oci-archive:PATH`, `docker://REF`, `tarball:PATH`. */
    source: text(4096).default('unknown'),
    created_at: text(64).default(''),
  })
  .meta({ id: 'AgentImage' });
export type AgentImage = z.infer<typeof AgentImage>;

/**
 * `GET /v1/info` on an agent. Unknown fields are ignored, so agents can add some. Its strings keep
 * the text rule (`text.ts`): an answer with a NUL is malformed, not stored.
 */
export const AgentInfo = z
  .object({
    id: z.string().regex(HOST_ID, `must be ${HOST_ID_RULE}`),
    kind: z.enum(HOST_KINDS),
    arch: z.enum(ARCHES),
    version: text(200).default(''),
    /** `kvm`, `tcg` (software emulation), or `none` (no QEMU). GPU passthrough needs `kvm`. */
    accelerator: text(64).default('none'),
    capacity: Resources,
    free: Resources,
    /** Names of the images this host boots (what `spec.image` may name). */
    images: z.array(text(256)).max(10_000).default([]),
    /** The same images with size, digest and source. */
    image_details: z.array(AgentImage).max(10_000).default([]),
    gpus: z.array(AgentGpu).max(1024).default([]),
    /** Each NVIDIA GPU as detected (nvidia-smi and sysfs), refreshed at every `GET /v1/info`. */
    gpu_devices: z.array(AgentGpuDevice).max(1024).default([]),
    /** GPU detection and passthrough state; null from agents that do not detect GPUs. */
    gpu_status: AgentGpuStatus.nullable().default(null),
    /**
     * Whether the host's guests are isolated from it (its loopback, its addresses, link-local and
     * private ranges): `mode` as configured, `active` once the agent's rules are in place; `reason`
     * when it is not active. Absent from older agents.
     */
    network_isolation: z
      .object({ mode: z.enum(['on', 'off']), active: z.boolean(), reason: text(1000).optional() })
      .optional(),
  })
  .meta({ id: 'AgentInfo' });
export type AgentInfo = z.infer<typeof AgentInfo>;
