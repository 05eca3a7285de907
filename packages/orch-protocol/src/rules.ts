/**
 * The protocol's rules that need no schema library: the text rule, the identifier rule, the
 * workspace rule, the service name rule and the manifest version. `@orch/envdef` imports them
 * from here (`@orch/protocol/rules`), so that `orch compile`, whose start-up is measured, does not
 * load zod and every schema of the API; the schemas (text.ts, manifest.ts, services.ts) build on
 * the same functions.
 */

import { AGENT_ID, ID_RULES, IMAGE_NAME, SERVICE_NAME } from './ids.js';

/**
 * The text rule of the orchestrator: every string it accepts (JSON fields, record keys, query
 * filters, path ids, an agent's answers) is well-formed Unicode without U+0000. PostgreSQL stores
 * neither a NUL nor a lone surrogate (in `text` or `jsonb`), and no field has a use for them, so
 * they are refused at the edge with `invalid_argument` naming the field, never passed to the store.
 */
const NUL = '\u0000';
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why `s` breaks the text rule, or undefined when it keeps it. */
export function textProblem(s: string): string | undefined {
  if (s.includes(NUL)) return 'must not contain U+0000 (NUL)';
  if (LONE_SURROGATE.test(s)) return 'must be well-formed Unicode (it has a lone surrogate)';
  return undefined;
}

/**
 * `s` made to keep the text rule, for text the orchestrator passes on or stores without having
 * validated it (an agent's error message): each NUL and lone surrogate becomes U+FFFD.
 */
export function cleanText(s: string): string {
  return s.replace(new RegExp(`\u0000|${LONE_SURROGATE.source}`, 'g'), '\uFFFD');
}

/** Longest task id. */
export const MAX_TASK_ID = 128;

// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * Why `id` cannot be a task id (or another identifier a user types, such as a snapshot id given to
 * `orch compile --from-build`), or undefined when it can: not empty, at most {@link MAX_TASK_ID}
 * characters, no control characters, no whitespace at either end, and the text rule. The one rule
 * of `orch compile` (`@orch/envdef`) and of orchd's `task_id` fields.
 *
 * @example identifierProblem('a\nb') // 'must not contain control characters'
 */
export function identifierProblem(id: string): string | undefined {
  if (id.trim() === '') return 'must not be empty';
  if (id.length > MAX_TASK_ID) return `must be at most ${MAX_TASK_ID} characters`;
  if (CONTROL.test(id)) return 'must not contain control characters';
  if (id !== id.trim()) return 'must not start or end with whitespace';
  return textProblem(id);
}

/**
 * {@link identifierProblem} as a sentence about `what`, or undefined when `id` is fine.
 *
 * @example checkIdentifier('--task-id', ' x') // '--task-id must not start or end with whitespace'
 */
export function checkIdentifier(what: string, id: string): string | undefined {
  const problem = identifierProblem(id);
  return problem === undefined ? undefined : `${what} ${problem}`;
}

/** The manifest's `version`: `1` is the only accepted version, as the string `"1"`. */
export const MANIFEST_VERSION = '1';

/** Longest guest workspace path. */
export const MAX_WORKSPACE = 4096;

/**
 * Why `path` cannot be the guest workspace, or undefined when it can: it must be an absolute guest
 * path (environment-definition.md, `workspace`) of at most {@link MAX_WORKSPACE} characters, under
 * the text rule. The one rule of the definition file (`@orch/envdef`), the manifest's
 * `machine.workspace` and a build's `workspace`.
 *
 * @example workspaceProblem('/workspace') // undefined; workspaceProblem('../..') // 'must be an absolute ...'
 */
export function workspaceProblem(path: string): string | undefined {
  if (!path.startsWith('/')) return 'must be an absolute guest path (starting with "/")';
  if (path.length > MAX_WORKSPACE) return `must be at most ${MAX_WORKSPACE} characters`;
  return textProblem(path);
}

/**
 * Why `name` cannot be a manifest service name ({@link SERVICE_NAME}), or undefined when it can.
 * The one rule of the definition file (`@orch/envdef`) and of the manifest orchd and the agent
 * accept (`manifestServices`).
 *
 * @example serviceNameProblem('db') // undefined; serviceNameProblem('Web') // 'must be 1-63 lower-case ...'
 */
export function serviceNameProblem(name: string): string | undefined {
  return SERVICE_NAME.test(name) ? undefined : `must be ${ID_RULES.serviceName}`;
}

/**
 * The one name no key of a manifest or a request may have (json-body.ts): `JSON.parse` keeps it as
 * a key, but every schema reader skips it, so a variable or secret of that name would vanish.
 */
export const RESERVED_KEY = '__proto__';

/**
 * The per-VM secret orchd generates for every environment and hands the agent with the caller's
 * secrets (in the guest's startup environment). No secret the caller names may have this name:
 * its value would be replaced by the generated one.
 */
export const VM_SECRET_NAME = 'ORCH_VM_SECRET';

/**
 * Secret names: the definition file's secret references, the manifest's, and a request's `secrets`.
 * Environment variable names, because the agent exports every secret into the startup script's
 * environment (and refuses any other name); never {@link RESERVED_KEY} or {@link VM_SECRET_NAME}.
 */
export const SECRET_NAME = /^(?!(?:__proto__|ORCH_VM_SECRET)$)[A-Za-z_][A-Za-z0-9_]{0,127}$/;
export const SECRET_NAME_RULE =
  'letters, digits and "_", starting with a letter or "_", at most 128, not "__proto__" or "ORCH_VM_SECRET"';

/**
 * Numeric bounds of a VM spec (orchestrator.md: "numeric bounds of spec fields: not shown"), the
 * one copy of `orch compile` (`@orch/envdef` checks the definition file's `resources` against them)
 * and of orchd's and the agent's `VmSpec`: a definition that compiles has a spec orchd accepts.
 * They keep every number a small exact integer; fleet capacity is checked at placement, not here.
 * Ports bound `expose[].port` and a service's `ports`.
 */
export const SPEC_LIMITS = {
  cpus: { min: 1, max: 1024 },
  ramMb: { min: 64, max: 16 * 1024 * 1024 }, // 64 MiB .. 16 TiB
  storageGb: { min: 1, max: 1024 * 1024 }, // 1 GiB .. 1 PiB
  maxRuntimeSeconds: { min: 1, max: 365 * 86_400 }, // 365 days
  gpuCount: { min: 1, max: 64 },
  port: { min: 1, max: 65_535 },
} as const;

/**
 * Most services one environment may run (each is a disk of its VM): the manifest check of orchd
 * and the agent (`manifestServices`) and `orch compile` refuse more.
 */
export const MAX_SERVICES = 16;

/** Most `expose` entries of one environment: orchd's `CreateEnvironmentRequest` and `orch compile` refuse more. */
export const MAX_EXPOSE = 64;

/**
 * Why `name` cannot be a rootfs image name (`spec.image`, the definition file's `image`), or
 * undefined when it can: an {@link IMAGE_NAME}, because that is all an agent stores, boots and
 * reports in `images` (it refuses any other `spec.image`). The one rule of `orch compile` and of
 * orchd's `VmSpec`: `image: "Debian 12"` is refused before anything is placed.
 *
 * @example imageNameProblem('debian-12') // undefined; imageNameProblem('Debian 12') // 'must be an image name: ...'
 */
export function imageNameProblem(name: string): string | undefined {
  return IMAGE_NAME.test(name) ? undefined : `must be an image name: ${ID_RULES.imageName}`;
}

/**
 * The agent image a service's `image` names: the name itself when it is an image name
 * (`busybox-httpd`), else the name `orch-agent image pull` gives that reference by default:
 * `<last path part>-<tag>` or `-<first 12 hex digits of the digest>`, lower case
 * (`postgres:16` -> `postgres-16`, `reg:5000/lib/web@sha256:ab12...` -> `web-ab12...`).
 *
 * @example serviceImageName('postgres:16') // 'postgres-16'
 */
export function serviceImageName(image: string): string {
  if (IMAGE_NAME.test(image)) return image;
  let ref = image.replace(/^docker:\/\//, '');
  let version = 'latest';
  const at = ref.indexOf('@');
  if (at >= 0) {
    version = ref
      .slice(at + 1)
      .replace(/^sha256:/, '')
      .slice(0, 12);
    ref = ref.slice(0, at);
  }
  const last = ref.split('/').at(-1) ?? '';
  const colon = last.lastIndexOf(':');
  const base = colon >= 0 ? last.slice(0, colon) : last;
  if (colon >= 0 && at < 0) version = last.slice(colon + 1);
  return `${base}-${version}`
    .toLowerCase()
    .replace(/[^a-z0-9._-]/g, '-')
    .slice(0, 63);
}

/** Longest `image` of a manifest service (an image name or an OCI reference). */
export const MAX_SERVICE_IMAGE = 1024;

/**
 * Why `image` cannot be a manifest service's `image`, or undefined when it can: at most
 * {@link MAX_SERVICE_IMAGE} characters without control characters, under the text rule, and
 * naming an agent image: {@link serviceImageName} of it is an {@link IMAGE_NAME} (no host can have
 * `/` or `:latest`, whose names would start with `-`). The one rule of `orch compile` and of the
 * manifest check of orchd and the agent.
 *
 * @example serviceImageProblem('postgres:16') // undefined; serviceImageProblem(':16') // 'names no image ...'
 */
export function serviceImageProblem(image: string): string | undefined {
  if (image === '') return 'must not be empty';
  if (image.length > MAX_SERVICE_IMAGE) return `must be at most ${MAX_SERVICE_IMAGE} characters`;
  if (CONTROL.test(image)) return 'must not contain control characters';
  const problem = textProblem(image);
  if (problem !== undefined) return problem;
  const name = serviceImageName(image);
  return IMAGE_NAME.test(name)
    ? undefined
    : `names no image a host can have: its image name ${JSON.stringify(name)} is not ${ID_RULES.imageName}`;
}

/**
 * Env names of a manifest service (`services.<name>.env`): the agent puts each into the service
 * container's process environment, so each is a variable name a shell can read: letters, digits
 * and `_`, not starting with a digit, at most 256. The one rule of `orch compile` and of the
 * manifest check of orchd and the agent.
 */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;
export const ENV_NAME_RULE = 'letters, digits and "_", starting with a letter or "_", at most 256';

/**
 * Why `name` cannot be a service's env name ({@link ENV_NAME}), or undefined when it can.
 *
 * @example envNameProblem('PGUSER') // undefined; envNameProblem('my-var') // 'must be a variable name: ...'
 */
export function envNameProblem(name: string): string | undefined {
  if (name === RESERVED_KEY) return RESERVED_PROBLEM;
  return ENV_NAME.test(name) ? undefined : `must be a variable name: ${ENV_NAME_RULE}`;
}

/** Why {@link RESERVED_KEY} names no env variable or secret. */
const RESERVED_PROBLEM = 'is reserved: no JSON reader keeps it';

/**
 * Why `name` cannot be a secret name ({@link SECRET_NAME}), or undefined when it can.
 *
 * @example secretNameProblem('db_pw') // undefined; secretNameProblem('__proto__') // 'is reserved: ...'
 */
export function secretNameProblem(name: string): string | undefined {
  if (name === RESERVED_KEY) return RESERVED_PROBLEM;
  return SECRET_NAME.test(name) ? undefined : `must be ${SECRET_NAME_RULE}`;
}

/**
 * Longest `startup_script` and `manifest_inline` (base64, so ASCII: characters are bytes) orchd
 * takes in `POST /v1/environments`, in characters (UTF-16 code units, as JSON strings count).
 * `orch compile` refuses a definition whose script or manifest would be longer, at the `setup`/`run`
 * line or the service that passes the limit.
 */
export const MAX_STARTUP_SCRIPT = 512 * 1024;
export const MAX_MANIFEST_INLINE = 512 * 1024;

/** The kinds and types of orchd's events (zod-free, so `orch` declares its help with them). */
export { EVENT_ACTIONS, EVENT_KINDS, EVENT_TYPES, type EventKind } from './event-types.js';
export { findGpuModel, GPU_MODELS, type GpuModel } from './gpu-catalog.js';
export { AGENT_ID, ID_RULES, IMAGE_NAME, SERVICE_NAME };
