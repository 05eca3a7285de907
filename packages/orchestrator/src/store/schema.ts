import type {
  AgentGpuDevice,
  AgentGpuStatus,
  AgentImage,
  BuildStep,
  ServiceStatus,
  VmSpec,
} from '@orch/protocol';
import type { ColumnType } from 'kysely';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
/** A timestamp the database fills in on insert (`DEFAULT now()`). */
type GeneratedTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json<T> = ColumnType<T, string, string>;

/** Registered host agents. `agent_token_enc` is AES-256-GCM ciphertext, null for "use MICROVM_AGENT_TOKEN". */
export interface HostsTable {
  id: string;
  kind: string;
  agent_url: string;
  agent_token_enc: string | null;
  arch: string;
  version: string;
  accelerator: string;
  state: string;
  health: string;
  health_detail: string | null;
  capacity: Json<{ cpus: number; ram_mb: number; disk_gb: number }>;
  free: Json<{ cpus: number; ram_mb: number; disk_gb: number }>;
  images: Json<string[]>;
  image_details: Json<AgentImage[]>;
  gpus: Json<{ model: string; count: number; free: number; mig_profiles: string[] }[]>;
  /** Each GPU as detected (migration 0010). */
  gpu_devices: ColumnType<AgentGpuDevice[], string | undefined, string>;
  /** GPU detection and passthrough state; null for agents that report none. */
  gpu_status: ColumnType<AgentGpuStatus | null, string | null | undefined, string | null>;
  labels: Json<Record<string, string>>;
  last_seen_at: Timestamp | null;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

/** What each host's agent reported at its health checks (capacity history, migration 0008). */
export interface HostSamplesTable {
  host_id: string;
  at: GeneratedTimestamp;
  capacity: Json<{ cpus: number; ram_mb: number; disk_gb: number }>;
  free: Json<{ cpus: number; ram_mb: number; disk_gb: number }>;
}

/** API keys: the secret is kept only as its SHA-256. */
export interface ApiKeysTable {
  id: string;
  label: string;
  secret_sha256: string;
  hint: string;
  created_at: GeneratedTimestamp;
  last_used_at: Timestamp | null;
  revoked_at: Timestamp | null;
}

/**
 * Browser sessions ended by `POST /logout` (migration 0009): the SHA-256 of the session's `sid`
 * and the session's own expiry; a row is pruned a day after that (see `RevokedSessionsRepo`).
 */
export interface RevokedSessionsTable {
  sid_sha256: string;
  expires_at: Timestamp;
}

/**
 * Idempotency keys of creates (migration 0010): per caller (`scope`: `master`, `api_key:<id>`,
 * `anonymous`), the environment the first create with the key made and a fingerprint of that
 * request (SHA-256 of it without secret values), so a different request under the same key is
 * refused instead of answered with the wrong environment.
 */
export interface IdempotencyKeysTable {
  scope: string;
  key: string;
  fingerprint: string;
  environment_id: string;
  created_at: GeneratedTimestamp;
}

/** Small facts about the deployment (for example the token-encryption key check value). */
export interface SettingsTable {
  key: string;
  value: string;
}

/** Environments: the request as posted (secrets sealed), where it runs and its lifecycle. */
export interface EnvironmentsTable {
  id: string;
  task_id: string;
  state: string;
  host_id: string;
  spec: Json<VmSpecJson>;
  manifest_inline: string;
  startup_script: string;
  expose: Json<{ port: number; as: string }[]>;
  /** AES-256-GCM sealed JSON of the secret values, including the generated per-VM secret. */
  secrets_enc: string;
  secret_names: Json<string[]>;
  seed_snapshot_id: string | null;
  restored_from_snapshot_id: string | null;
  ports: ColumnType<PortJson[], string | undefined, string>;
  /** The manifest's services as the agent last reported them (migration 0005_services). */
  services: ColumnType<ServiceStatus[], string | undefined, string>;
  last_error: string | null;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
  started_at: Timestamp | null;
  expires_at: Timestamp | null;
  stopped_at: Timestamp | null;
  last_move: ColumnType<LastMoveJson | null, string | null | undefined, string | null>;
}

/** The resource spec as posted (`VmSpec` of the protocol). */
export type VmSpecJson = VmSpec;

export interface PortJson {
  port: number;
  as: string;
  host: string;
  host_port: number;
}

/** Snapshots; `kind` null means "not written yet" (and reads back as `disk`, per the spec). */
export interface SnapshotsTable {
  id: string;
  vm_id: string;
  task_id: string | null;
  host_id: string;
  parent_snapshot_id: string | null;
  mode: string;
  state: string;
  comment: string | null;
  requested_live: boolean;
  kind: string | null;
  arch: string | null;
  digest: string | null;
  size_bytes: ColumnType<string | null, number | null, number | null>;
  retention_until: Timestamp | null;
  last_error: string | null;
  export_ref: string | null;
  /** sha256 of a live snapshot's memory state (0007). */
  state_digest: ColumnType<string | null, string | null | undefined, string | null>;
  /** Accelerator of the host that took it: a live snapshot resumes only under the same (0007). */
  accelerator: ColumnType<string | null, string | null | undefined, string | null>;
  /** Build layers only (migration 0006): written together with `ready`, never before. */
  layer_key: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

export interface SnapshotExportsTable {
  id: ColumnType<number, never, never>;
  snapshot_id: string;
  destination: string;
  status: string;
  requested_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
  last_error: string | null;
  /** Where the export was written (`<destination>/<snapshot id>`) once `ready` (0007). */
  export_ref: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Moves of environments between hosts (a drain; 0007). States: `MOVE_STATES` of @orch/protocol. */
export interface EnvironmentMovesTable {
  id: string;
  environment_id: string;
  from_host_id: string;
  to_host_id: string;
  state: string;
  /** The agents' id of the moving artifact (a live snapshot of the paused VM; never a Snapshot record). */
  artifact_id: string;
  /** The moving artifact's checksums, once the source wrote it. */
  digest: string | null;
  state_digest: string | null;
  reason: string | null;
  downtime_ms: number | null;
  paused_at: Timestamp | null;
  /** Until when the orchd driving it holds it; past it, any reconciler takes the move over. */
  lease_until: GeneratedTimestamp;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

/** `environments.last_move` (0007). */
export interface LastMoveJson {
  from_host_id: string;
  to_host_id: string;
  downtime_ms: number;
  at: string;
}

/** Events of GET /v1/events, written by triggers (migration 0004). */
export interface OrchEventsTable {
  id: ColumnType<string, never, never>;
  type: string;
  payload: unknown;
  created_at: GeneratedTimestamp;
}

/** Builds (migration 0006): the steps as JSON (`BuildStep` of @orch/protocol). */
export interface BuildsTable {
  id: string;
  task_id: string;
  state: string;
  host_id: string | null;
  arch: string | null;
  base_image: string;
  base_digest: string | null;
  spec: Json<VmSpecJson>;
  workspace: string;
  no_cache: boolean;
  secret_names: Json<string[]>;
  steps: Json<BuildStepJson[]>;
  progress: ColumnType<number, number | undefined, number>;
  artifact_snapshot_id: string | null;
  vm_id: string | null;
  last_error: string | null;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
  finished_at: Timestamp | null;
}

export type BuildStepJson = BuildStep;

export interface Database {
  builds: BuildsTable;
  environments: EnvironmentsTable;
  snapshots: SnapshotsTable;
  snapshot_exports: SnapshotExportsTable;
  environment_moves: EnvironmentMovesTable;
  hosts: HostsTable;
  host_samples: HostSamplesTable;
  api_keys: ApiKeysTable;
  revoked_sessions: RevokedSessionsTable;
  idempotency_keys: IdempotencyKeysTable;
  settings: SettingsTable;
  orch_events: OrchEventsTable;
}
