/**
 * What validation produces (the definition with defaults applied), the limits and defaults of
 * environment-definition.md, and the field names and patterns the validator checks against.
 */
import { SPEC_LIMITS } from '@orch/protocol/rules';
import type { Position } from './diagnostics.js';

/** A GPU request as the definition states it (validated against the catalog). */
export interface GpuRequest {
  readonly model: string;
  readonly count: number;
  readonly mig?: string;
}

/** A service environment variable: a literal (always a string) or a reference to a named secret. */
export type EnvValue = { readonly value: string } | { readonly secret: string };

/** A service of the manifest, with env entries in file order. */
export interface ServiceDefinition {
  readonly name: string;
  /** Where its name was written (compile points there when the manifest grows too long). */
  readonly at?: Position;
  readonly image: string;
  readonly ports: readonly number[];
  readonly env: readonly { readonly name: string; readonly value: EnvValue }[];
}

/** One `expose` entry. */
export interface ExposeEntry {
  readonly port: number;
  readonly as: string;
}

/** A definition file that passed validation, with every default applied. */
export interface Definition {
  /** The rootfs image, with where it was written (so `--from-build` can point at it). */
  readonly image?: { readonly name: string; readonly at: Position };
  readonly cpus: number;
  readonly ramMb: number;
  readonly storageGb: number;
  readonly maxRuntimeSeconds: number;
  readonly gpu?: GpuRequest;
  readonly workspace: string;
  readonly setup: readonly string[];
  readonly run: readonly string[];
  /** Where each `setup` and `run` line was written (compile points there when the script grows too long). */
  readonly lineAt?: { readonly setup: readonly Position[]; readonly run: readonly Position[] };
  readonly services: readonly ServiceDefinition[];
  readonly expose: readonly ExposeEntry[];
}

/**
 * Numeric bounds the spec leaves open ("numeric bounds of spec fields: not shown"): orchd's own
 * (`SPEC_LIMITS` of `@orch/protocol/rules`, which its `VmSpec` is built from), so that a number
 * that compiles is one orchd accepts. See the package README.
 */
export const LIMITS = SPEC_LIMITS;

export const DEFAULTS = {
  cpus: 2,
  memory: '2GiB',
  ramMb: 2048,
  disk: '10GiB',
  storageGb: 10,
  maxRuntime: '1h',
  maxRuntimeSeconds: 3600,
  workspace: '/workspace',
} as const;

export const TOP_FIELDS = [
  'version',
  'image',
  'resources',
  'workspace',
  'setup',
  'run',
  'services',
  'expose',
];
export const RESOURCE_FIELDS = ['cpus', 'memory', 'disk', 'max_runtime', 'gpu'];
export const GPU_FIELDS = ['model', 'count', 'mig'];
export const SERVICE_FIELDS = ['image', 'ports', 'env'];
export const ENV_FIELDS = ['value', 'secret'];
export const EXPOSE_FIELDS = ['port', 'as'];

export const DNS_LABEL = /^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
export const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f]/;
export const MAX_ALIAS_RESOLUTIONS = 1000;

/** The diagnostic for `image` in a definition compiled with `--from-build` (compile rule 9). */
export const IMAGE_WITH_FROM_BUILD =
  'image cannot be used with --from-build: a build artifact and an image both name the rootfs to boot; remove image, or pass --image-is-base if it is the image the artifact was built on';
