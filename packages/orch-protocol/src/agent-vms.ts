import { z } from 'zod';
import { ID_RULES, IMAGE_NAME, SPEC_LIMITS } from './rules.js';
import { ServiceStatus } from './services.js';
import { agentId, base64Text, text } from './text.js';

/** The longest `max_runtime_seconds` (365 days, the definition file's own limit for `max_runtime`). */
export const MAX_RUNTIME_SECONDS = SPEC_LIMITS.maxRuntimeSeconds.max;

/** An integer field within one of the {@link SPEC_LIMITS}. */
const bounded = (limits: { readonly min: number; readonly max: number }) =>
  z.number().int().min(limits.min).max(limits.max);

/**
 * The host-agent protocol beyond `GET /v1/info`: VMs, exec, console, snapshots. HTTP + JSON below
 * the registered agent URL; `Authorization: Bearer <agent token>` on every request (401 otherwise);
 * errors use the orchestrator's envelope `{ error: { code, message, details? } }`; never a redirect.
 *
 *   POST   /v1/vms                          CreateVmRequest -> 202 AgentVm (state "creating")
 *   GET    /v1/vms                          -> 200 { vms: AgentVm[] }
 *   GET    /v1/vms/{id}                     -> 200 AgentVm | 404
 *   DELETE /v1/vms/{id}                     -> 204 (stops the VM and frees disk, ports, processes) | 404
 *   POST   /v1/vms/{id}/exec                ExecRequest -> 200 ExecResult
 *   GET    /v1/vms/{id}/console             WebSocket: binary frames both ways = the guest's serial console
 *   GET    /v1/vms/{id}/log?offset=&tail=  -> 200 text/plain: a window of the startup script's output (logs.ts)
 *                                           (`?service=NAME`: that service's log, services.ts)
 *   POST   /v1/vms/{id}/snapshots           CreateSnapshotRequest -> 201 SnapshotArtifact
 *   POST   /v1/vms/{id}/pause               -> 200 AgentVm (paused: memory saved encrypted, QEMU ended) | 409
 *   POST   /v1/vms/{id}/resume              -> 200 AgentVm (running again, same id and memory) | 409
 *   DELETE /v1/snapshots/{snapshot_id}      -> 204 | 404
 *   GET    /v1/snapshots/{snapshot_id}/data -> 200 application/octet-stream (the artifact, for exports)
 *
 * The agent registers these routes and checks every `{id}`/`{snapshot_id}` against
 * `AGENT_ID` (ids.ts) before it touches anything (an id outside the pattern is `404 not_found`). The
 * VM lifecycle is `AGENT_VM_TRANSITIONS` (transitions.ts).
 *
 * Pause and resume: `running --pause / agent stop--> pausing --saved--> paused --resume / agent
 * start--> resuming --guest answers--> running`; `pausing` goes back to `running` if the state
 * cannot be saved, `resuming` to `error` if it cannot be restored. A paused VM holds no CPU, RAM,
 * host port or process, only its disk and saved state.
 */
export const AGENT_ROUTES = {
  vm: '/v1/vms/{id}',
  exec: '/v1/vms/{id}/exec',
  console: '/v1/vms/{id}/console',
  log: '/v1/vms/{id}/log',
  snapshots: '/v1/vms/{id}/snapshots',
  pause: '/v1/vms/{id}/pause',
  resume: '/v1/vms/{id}/resume',
  snapshot: '/v1/snapshots/{snapshot_id}',
  snapshotData: '/v1/snapshots/{snapshot_id}/data',
} as const;

/** `route` with its one `{param}` filled in (percent-encoded). */
const fill = (route: string, value: string) => route.replace(/\{\w+\}/, encodeURIComponent(value));

/** The agent's paths for one VM or snapshot, built from {@link AGENT_ROUTES} (what orchd dials). */
export const AGENT_VM_PATHS = {
  vms: '/v1/vms',
  vm: (id: string) => fill(AGENT_ROUTES.vm, id),
  exec: (id: string) => fill(AGENT_ROUTES.exec, id),
  console: (id: string) => fill(AGENT_ROUTES.console, id),
  log: (id: string) => fill(AGENT_ROUTES.log, id),
  snapshots: (id: string) => fill(AGENT_ROUTES.snapshots, id),
  pause: (id: string) => fill(AGENT_ROUTES.pause, id),
  resume: (id: string) => fill(AGENT_ROUTES.resume, id),
  snapshot: (snapshotId: string) => fill(AGENT_ROUTES.snapshot, snapshotId),
  snapshotData: (snapshotId: string) => fill(AGENT_ROUTES.snapshotData, snapshotId),
} as const;

/**
 * The image an agent boots when `spec.image` is absent (the agent's `DEFAULT_IMAGE`; orchd's
 * builds and from-build checks count a layer built without an image as built on it).
 */
export const DEFAULT_IMAGE = 'busybox';

/**
 * Resources of a VM, each number within its {@link SPEC_LIMITS} (the bounds `orch compile` checks
 * too). Closed, like every request object: an unknown field is refused, naming it.
 */
export const VmSpec = z
  .strictObject({
    cpus: bounded(SPEC_LIMITS.cpus),
    ram_mb: bounded(SPEC_LIMITS.ramMb),
    storage_gb: bounded(SPEC_LIMITS.storageGb),
    max_runtime_seconds: bounded(SPEC_LIMITS.maxRuntimeSeconds),
    /**
     * The rootfs to boot: an image name, all an agent boots. The pattern and message of
     * `imageNameProblem` (rules.ts, the rule `orch compile` applies), as a regex so that the OpenAPI
     * document shows it.
     */
    image: z.string().regex(IMAGE_NAME, `must be an image name: ${ID_RULES.imageName}`).optional(),
    gpu: z
      .strictObject({ model: text(128, 1), count: bounded(SPEC_LIMITS.gpuCount), mig: text(64).optional() })
      .optional(),
  })
  .meta({ id: 'VmSpec' });
export type VmSpec = z.infer<typeof VmSpec>;

export const ExposePort = z
  .strictObject({
    port: bounded(SPEC_LIMITS.port),
    as: z.string().regex(/^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/),
  })
  .meta({ id: 'ExposePort' });

/**
 * `POST /v1/vms`. `secrets` are the values for the manifest's secret references; the agent passes
 * them to the guest (startup script environment) and never writes them to its logs or disks in
 * clear. `seed_snapshot_id` boots the root disk of a build artifact (from-build); `restore` starts
 * from a snapshot: a `live` one resumes where it stopped, a `disk` one cold-boots. A snapshot's disk
 * is the root filesystem: with one, `spec.image` may only name the image that snapshot descends
 * from (400 otherwise); orchd sends none.
 */
export const CreateVmRequest = z
  .strictObject({
    id: agentId(),
    spec: VmSpec,
    manifest_inline: base64Text(1024 * 1024),
    startup_script: text(1024 * 1024),
    secrets: z.record(text(128), text(64 * 1024)).default({}),
    expose: z.array(ExposePort).default([]),
    seed_snapshot_id: agentId().optional(),
    restore_snapshot_id: agentId().optional(),
  })
  .meta({ id: 'CreateVmRequest' });
export type CreateVmRequest = z.infer<typeof CreateVmRequest>;

/**
 * VM states on an agent (the moves are `AGENT_VM_TRANSITIONS`, transitions.ts); an environment's
 * states are the same list (`ENVIRONMENT_STATES`).
 */
export const AGENT_VM_STATES = [
  'creating',
  'running',
  'pausing',
  'paused',
  'resuming',
  'stopping',
  'stopped',
  'error',
] as const;
export type AgentVmState = (typeof AGENT_VM_STATES)[number];

/** A VM as the agent reports it. `ports` maps each exposed guest port to the host port forwarding it. */
export const AgentVm = z
  .object({
    id: text(64),
    state: z.enum(AGENT_VM_STATES),
    spec: VmSpec,
    ports: z.array(z.object({ port: z.number().int(), as: text(63), host_port: z.number().int() })),
    /** Address on which the host ports are reachable (the agent's bind address). */
    host_address: text(256),
    accelerator: text(64),
    created_at: z.iso.datetime(),
    started_at: z.iso.datetime().nullable(),
    /**
     * When max_runtime_seconds runs out; the agent stops the VM then. Max runtime counts running
     * time from the first start: time spent paused does not count (null while paused).
     */
    expires_at: z.iso.datetime().nullable(),
    /** Why the VM is in `error` (or stopped unexpectedly). */
    error: text(4096).nullable(),
    /** Set when the VM was started from a snapshot. */
    restored_from: text(64).nullable().default(null),
    /** The manifest's services, as the guest last reported them (services.ts). */
    services: z.array(ServiceStatus).default([]),
  })
  .meta({ id: 'AgentVm' });
export type AgentVm = z.infer<typeof AgentVm>;

export const AgentVmList = z.object({ vms: z.array(AgentVm) }).meta({ id: 'AgentVmList' });

/** Largest stdout or stderr an exec returns, per stream; past it `truncated` is true (never silent). */
export const EXEC_OUTPUT_LIMIT = 16 * 1024 * 1024;

/** `POST .../exec`: a command in the guest, run without a shell (argv[0] is looked up in PATH). */
export const ExecRequest = z
  .strictObject({
    argv: z
      .array(text(128 * 1024))
      .min(1)
      .max(4096),
    env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/), text(128 * 1024)).default({}),
    cwd: text(4096).startsWith('/').optional(),
    /** Wall-clock limit; on expiry the process is killed and `timed_out` is true. */
    timeout_seconds: z
      .number()
      .int()
      .min(1)
      .max(24 * 3600)
      .default(60),
    /** Bytes for the command's standard input, canonical base64 (base64.ts); anything else is refused. */
    stdin_base64: base64Text(32 * 1024 * 1024).optional(),
  })
  .meta({ id: 'ExecRequest' });
export type ExecRequest = z.infer<typeof ExecRequest>;

/** Output is base64 (commands may print any bytes). `exit_code` is null when killed by the timeout or a signal. */
export const ExecResult = z
  .object({
    exit_code: z.number().int().nullable(),
    stdout_base64: z.string(),
    stderr_base64: z.string(),
    timed_out: z.boolean(),
    truncated: z.boolean(),
    duration_ms: z.number().int(),
  })
  .meta({ id: 'ExecResult' });
export type ExecResult = z.infer<typeof ExecResult>;

/** `POST .../snapshots`. `live` asks for memory and device state too; the answer says what was written. */
export const CreateSnapshotRequest = z
  .strictObject({ snapshot_id: agentId(), live: z.boolean().default(false) })
  .meta({ id: 'CreateSnapshotRequest' });
export type CreateSnapshotRequest = z.infer<typeof CreateSnapshotRequest>;

/** What the agent actually wrote: `kind` is `disk` when a live snapshot could not be taken. */
export const SnapshotArtifact = z
  .object({
    snapshot_id: text(64),
    vm_id: text(64),
    kind: z.enum(['disk', 'live']),
    size_bytes: z.number().int().nonnegative(),
    /** Hex sha256 of the rootfs artifact. */
    digest: z.string().regex(/^[0-9a-f]{64}$/),
    /** Hex sha256 of the memory state (`state.bin`) of a live snapshot. */
    state_digest: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
    arch: z.enum(['amd64', 'arm64']),
    /** The accelerator it was taken under (a live one resumes only under the same). */
    accelerator: text(64).optional(),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'SnapshotArtifact' });
export type SnapshotArtifact = z.infer<typeof SnapshotArtifact>;
