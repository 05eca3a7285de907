import { createHash, createHmac, hkdfSync } from 'node:crypto';
import { LAYER_KEY_SCHEME } from '@orch/protocol';

/** What a setup line's layer key covers (and nothing else: CPUs, RAM, runtime, expose, run lines never). */
export interface LayerInputs {
  /** `layer_key[i-1]`, or for the first line the base image's digest (never its name). */
  readonly parent: string;
  readonly arch: string;
  readonly storageGb: number;
  readonly workspace: string;
  /** The literal environment the line sees. */
  readonly env: Readonly<Record<string, string>>;
  /** Every secret the line can see: name -> HMAC of its value (see {@link secretMacs}). */
  readonly secretMacs: ReadonlyMap<string, string>;
  readonly line: string;
}

/** The literal environment of a setup line in a build: what the startup script sees besides secrets. */
export const BUILD_LINE_ENV: Readonly<Record<string, string>> = Object.freeze({ HOME: '/root' });

const byName = <T>(entries: Iterable<[string, T]>): [string, T][] =>
  [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/**
 * The layer key of one setup line: hex sha256 of the JSON array
 * `[scheme, parent, arch, storage_gb, workspace, [[env name, value]...], [[secret name, hmac]...], line]`
 * (pairs sorted by name). A JSON array cannot be confused the way a string join can (`a|b` + `c`
 * vs `a` + `b|c`).
 *
 * @example
 * layerKey({ parent: 'sha256:ab…', arch: 'amd64', storageGb: 1, workspace: '/workspace',
 *   env: BUILD_LINE_ENV, secretMacs: new Map(), line: 'echo hi > f' }) // 64 hex digits
 */
export function layerKey(inputs: LayerInputs): string {
  const recipe = [
    LAYER_KEY_SCHEME,
    inputs.parent,
    inputs.arch,
    inputs.storageGb,
    inputs.workspace,
    byName(Object.entries(inputs.env)),
    byName(inputs.secretMacs.entries()),
    inputs.line,
  ];
  return createHash('sha256').update(JSON.stringify(recipe)).digest('hex');
}

/** The keys of every line in order: each line's parent is the previous line's key. */
export function layerKeys(
  base: Omit<LayerInputs, 'line' | 'parent'> & { readonly baseDigest: string },
  lines: readonly string[],
): string[] {
  const keys: string[] = [];
  let parent = base.baseDigest;
  for (const line of lines) {
    parent = layerKey({ ...base, parent, line });
    keys.push(parent);
  }
  return keys;
}

/**
 * The server key that secret values are MACed under for layer keys, derived (HKDF-SHA256) from
 * `TOKEN_ENCRYPTION_KEY`: every orchd on one database has that key, so they compute the same layer
 * keys, and nobody without it can test a guessed value against a key.
 */
export function layerSecretKey(encryptionKey: Buffer): Buffer {
  return Buffer.from(
    hkdfSync('sha256', encryptionKey, Buffer.alloc(0), 'orchd build-layer secret mac v1', 32),
  );
}

/** name -> hex HMAC-SHA256(server key, value) for each secret; the values themselves go nowhere. */
export function secretMacs(key: Buffer, secrets: ReadonlyMap<string, string>): Map<string, string> {
  return new Map(
    [...secrets].map(([name, value]) => [
      name,
      createHmac('sha256', key).update(value, 'utf8').digest('hex'),
    ]),
  );
}
