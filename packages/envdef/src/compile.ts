import { MANIFEST_VERSION } from '@orch/protocol/rules';
import { type Definition, type ExposeEntry, type GpuRequest, IMAGE_WITH_FROM_BUILD } from './definition.js';
import type { Diagnostic } from './diagnostics.js';

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
}

/**
 * Compiles a validated definition into the environment request. The only failure left at this
 * stage is `image` together with `--from-build`; it points at the `image` line.
 */
export function compileDefinition(
  def: Definition,
  options: CompileOptions,
):
  | { readonly ok: true; readonly compiled: Compiled }
  | { readonly ok: false; readonly diagnostics: Diagnostic[] } {
  if (options.fromBuild !== undefined && def.image) {
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
  const lines = [
    '#!/bin/sh',
    'set -eu',
    `cd ${shellQuote(def.workspace)}`,
    ...(options.fromBuild === undefined ? def.setup : []),
    ...def.run,
  ];
  const request: CompiledRequest = {
    task_id: options.taskId,
    spec,
    manifest_inline: base64Utf8(manifestJson),
    secrets: {},
    startup_script: `${lines.join('\n')}\n`,
    expose: def.expose.map((e) => ({ port: e.port, as: e.as })),
    required_secrets: [...new Set(secretNames)].sort(),
    ...(options.fromBuild !== undefined ? { seed_snapshot_id: options.fromBuild } : {}),
  };
  return { ok: true, compiled: { request, manifest, manifestJson, setup: def.setup } };
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
