import { MANIFEST_VERSION, MAX_MANIFEST_INLINE, MAX_STARTUP_SCRIPT } from '@orch/protocol/rules';
import { type Definition, type ExposeEntry, type GpuRequest, IMAGE_WITH_FROM_BUILD } from './definition.js';
import { type Diagnostic, type Position, START } from './diagnostics.js';

/** `spec` of the compiled request, keys in wire order. */
export interface ResourceSpec {
  readonly cpus: number;
  readonly ram_mb: number;
  readonly storage_gb: number;
  readonly max_runtime_seconds: number;
  readonly image?: string;
  readonly gpu?: GpuRequest;
}

/**
 * The body of `POST /v1/environments` as compile prints it (orchestrator.md, "Compiled environment
 * request"): `secrets` is always `{}` and `required_secrets` is added. `up` posts the same object
 * without `required_secrets` and with `secrets` filled.
 */
export interface CompiledRequest {
  readonly task_id: string;
  readonly spec: ResourceSpec;
  readonly manifest_inline: string;
  readonly secrets: Readonly<Record<string, string>>;
  readonly startup_script: string;
  readonly expose: readonly ExposeEntry[];
  readonly required_secrets: readonly string[];
  readonly seed_snapshot_id?: string;
}

/** The manifest as the guest receives it (decoded `manifest_inline`). */
export interface Manifest {
  readonly version: '1';
  readonly machine: { readonly workspace: string };
  readonly services: Readonly<
    Record<
      string,
      {
        readonly image: string;
        readonly ports: readonly number[];
        readonly env: Readonly<Record<string, string | { readonly secret: string }>>;
      }
    >
  >;
}

/** A compiled definition: the request plus the exact manifest bytes inside it. */
export interface Compiled {
  readonly request: CompiledRequest;
  readonly manifest: Manifest;
  /** The manifest JSON exactly as base64-encoded into `manifest_inline`. */
  readonly manifestJson: string;
  /** The `setup:` lines in file order (what `orch build` turns into layers), with or without `--from-build`. */
  readonly setup: readonly string[];
}

export interface CompileOptions {
  /** `--task-id`, or the name of the definition file's parent directory. */
  readonly taskId: string;
  /** `--from-build <snapshot-id>`: seed from a build artifact; the script keeps only the run phase. */
  readonly fromBuild?: string;
  /**
   * `--image-is-base` (with `fromBuild`): the definition's `image` names the image the artifact
   * was built on, not a root filesystem to boot, so it is kept in `spec.image` (orchd checks it
   * against the artifact) instead of being an error (compile rule 9 otherwise).
   */
  readonly imageIsBase?: boolean;
}

/** Whether `image` in the definition is an error: with `--from-build`, unless `--image-is-base`. */
export function imageForbidden(options: Pick<CompileOptions, 'fromBuild' | 'imageIsBase'>): boolean {
  return options.fromBuild !== undefined && options.imageIsBase !== true;
}

/**
 * Compiles a validated definition into the environment request. The failures left at this stage:
 * `image` together with `--from-build` (at the `image` line), and a startup script or manifest
 * longer than orchd takes (`MAX_STARTUP_SCRIPT`, `MAX_MANIFEST_INLINE` of `@orch/protocol/rules`:
 * at the `setup`/`run` line or the service that passes the limit).
 */
export function compileDefinition(
  def: Definition,
  options: CompileOptions,
):
  | { readonly ok: true; readonly compiled: Compiled }
  | { readonly ok: false; readonly diagnostics: Diagnostic[] } {
  if (imageForbidden(options) && def.image) {
    return {
      ok: false,
      diagnostics: [{ ...def.image.at, message: IMAGE_WITH_FROM_BUILD }],
    };
  }
  const manifest: Manifest = {
    version: MANIFEST_VERSION,
    machine: { workspace: def.workspace },
    services: Object.fromEntries(
      def.services.map((s) => [
        s.name,
        {
          image: s.image,
          ports: s.ports,
          env: Object.fromEntries(
            s.env.map((e) => [e.name, 'secret' in e.value ? { secret: e.value.secret } : e.value.value]),
          ),
        },
      ]),
    ),
  };
  const manifestJson = JSON.stringify(manifest);
  const manifestInline = base64Utf8(manifestJson);
  const secretNames = def.services.flatMap((s) =>
    s.env.flatMap((e) => ('secret' in e.value ? [e.value.secret] : [])),
  );
  const spec: ResourceSpec = {
    cpus: def.cpus,
    ram_mb: def.ramMb,
    storage_gb: def.storageGb,
    max_runtime_seconds: def.maxRuntimeSeconds,
    ...(def.image ? { image: def.image.name } : {}),
    ...(def.gpu ? { gpu: def.gpu } : {}),
  };
  const header = ['#!/bin/sh', 'set -eu', `cd ${shellQuote(def.workspace)}`];
  const body = [...(options.fromBuild === undefined ? sourced(def, 'setup') : []), ...sourced(def, 'run')];
  const startupScript = `${[...header, ...body.map((l) => l.line)].join('\n')}\n`;
  const tooLong = [
    ...(startupScript.length > MAX_STARTUP_SCRIPT ? [scriptTooLong(header, body, startupScript.length)] : []),
    ...(manifestInline.length > MAX_MANIFEST_INLINE
      ? [manifestTooLong(manifest, def, manifestInline.length)]
      : []),
  ];
  if (tooLong.length > 0) return { ok: false, diagnostics: tooLong };
  const request: CompiledRequest = {
    task_id: options.taskId,
    spec,
    manifest_inline: manifestInline,
    secrets: {},
    startup_script: startupScript,
    expose: def.expose.map((e) => ({ port: e.port, as: e.as })),
    required_secrets: [...new Set(secretNames)].sort(),
    ...(options.fromBuild !== undefined ? { seed_snapshot_id: options.fromBuild } : {}),
  };
  return { ok: true, compiled: { request, manifest, manifestJson, setup: def.setup } };
}

/** The `setup` or `run` lines with where each was written and how to name it in a message. */
function sourced(def: Definition, section: 'setup' | 'run') {
  return def[section].map((line, i) => ({
    line,
    name: `${section}[${i}]`,
    at: def.lineAt?.[section][i] ?? START,
  }));
}

/** The startup script is longer than orchd takes: said at the line that passes the limit. */
function scriptTooLong(
  header: readonly string[],
  body: readonly { line: string; name: string; at: Position }[],
  length: number,
): Diagnostic {
  let size = header.reduce((n, l) => n + l.length + 1, 0);
  const over =
    body.find((l) => {
      size += l.line.length + 1;
      return size > MAX_STARTUP_SCRIPT;
    }) ?? body.at(-1);
  return {
    ...(over?.at ?? START),
    message:
      `${over?.name ?? 'the definition'} makes the startup script ${length} characters long, more than the ` +
      `${MAX_STARTUP_SCRIPT} orchd takes (startup_script): keep large content in files of the workspace, not in setup or run lines`,
  };
}

/** The manifest is longer than orchd takes: said at the service that passes the limit. */
function manifestTooLong(manifest: Manifest, def: Definition, length: number): Diagnostic {
  const services = Object.entries(manifest.services);
  const over = def.services.find((_, i) => {
    const upTo = { ...manifest, services: Object.fromEntries(services.slice(0, i + 1)) };
    return base64Length(JSON.stringify(upTo)) > MAX_MANIFEST_INLINE;
  });
  return {
    ...(over?.at ?? START),
    message:
      `${over ? `service "${over.name}"` : 'the definition'} makes the manifest ${length} characters of base64 long, ` +
      `more than the ${MAX_MANIFEST_INLINE} orchd takes (manifest_inline): shorten the env values of the services`,
  };
}

/** The length of {@link base64Utf8} of `text`, without encoding it. */
function base64Length(text: string): number {
  return Math.ceil(new TextEncoder().encode(text).length / 3) * 4;
}

/** Quotes a word for `sh` unless it is made only of characters that need no quoting. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_./+:@%=-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** Base64 of the UTF-8 bytes of `text`, in Node and in browsers alike. */
export function base64Utf8(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}
