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
  gpus: Json<{ model: string; count: number; free: number; mig_profiles: string[] }[]>;
  labels: Json<Record<string, string>>;
  last_seen_at: Timestamp | null;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
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

/** Small facts about the deployment (for example the token-encryption key check value). */
export interface SettingsTable {
  key: string;
  value: string;
}

export interface Database {
  hosts: HostsTable;
  api_keys: ApiKeysTable;
  settings: SettingsTable;
}
