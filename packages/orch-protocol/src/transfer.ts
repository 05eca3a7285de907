import { z } from 'zod';
import { agentId, text } from './text.js';

/**
 * Snapshots travel between hosts (agent protocol, beyond agent-vms.ts):
 *
 *   GET  /v1/snapshots/{snapshot_id}/files/{name}  -> 200 application/octet-stream (one artifact file)
 *   POST /v1/snapshots/{snapshot_id}/export        SnapshotExportRequest -> 200 SnapshotExportResult
 *   POST /v1/snapshots/{snapshot_id}/fetch         SnapshotFetchRequest  -> 200 SnapshotArtifact
 *   POST /v1/destinations/check                    DestinationCheck      -> 200 DestinationCheck
 *
 * An artifact is the files of {@link ARTIFACT_FILES} (a disk snapshot has no `state.bin`); its
 * `snapshot.json` holds what a restore needs (spec, kernel command line, kernel, accelerator, QEMU
 * version) and the two checksums: `digest` (sha256 of `disk.qcow2`) and `state_digest` (sha256 of
 * `state.bin`). A fetch is always verified against the checksums the caller passes (orchd's
 * record), never against what the source says about itself.
 */
export const ARTIFACT_FILES = ['snapshot.json', 'disk.qcow2', 'state.bin', 'startup.log'] as const;
export type ArtifactFile = (typeof ARTIFACT_FILES)[number];

/** The name of the export manifest written next to the files at `<export_ref>/`. */
export const EXPORT_MANIFEST = 'manifest.json';

export const TRANSFER_ROUTES = {
  snapshotFile: '/v1/snapshots/{snapshot_id}/files/{name}',
  snapshotExport: '/v1/snapshots/{snapshot_id}/export',
  snapshotFetch: '/v1/snapshots/{snapshot_id}/fetch',
  destinationCheck: '/v1/destinations/check',
} as const;

export const TRANSFER_PATHS = {
  snapshotFile: (id: string, name: ArtifactFile) =>
    `/v1/snapshots/${encodeURIComponent(id)}/files/${encodeURIComponent(name)}`,
  snapshotExport: (id: string) => `/v1/snapshots/${encodeURIComponent(id)}/export`,
  snapshotFetch: (id: string) => `/v1/snapshots/${encodeURIComponent(id)}/fetch`,
  destinationCheck: () => '/v1/destinations/check',
} as const;

/** A parsed export destination (or export reference: the same grammar). */
export type Destination =
  | { readonly scheme: 'file'; readonly path: string; readonly url: string }
  | { readonly scheme: 's3'; readonly bucket: string; readonly prefix: string; readonly url: string };

const S3_BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const SEGMENT = /^[A-Za-z0-9._~+=@,-]+$/;

/**
 * Checks an export destination before anything is dialled or written: `file:///absolute/dir`
 * (no host, no `.`/`..` segments) or `s3://bucket[/prefix]` (bucket per S3's naming rules; the
 * endpoint, region and credentials are the agent's configuration, never part of the URL). No
 * userinfo at all (not even an empty `@`, as in `s3://@bucket`, which the URL parser drops
 * silently), no query or fragment; path segments of letters, digits and `._~+=@,-` only.
 *
 * @example
 * parseDestination('s3://backups/orch')  // { ok: true, value: { scheme: 's3', bucket: 'backups', prefix: 'orch', ... } }
 * parseDestination('file://../etc')      // { ok: false, reason: 'file: destinations are file:///absolute/path' }
 * parseDestination('s3://@backups')      // { ok: false, reason: 'destination must not embed credentials ...' }
 */
export function parseDestination(
  raw: string,
): { ok: true; value: Destination } | { ok: false; reason: string } {
  const bad = (reason: string) => ({ ok: false as const, reason });
  if (raw.length > 2048) return bad('destination is longer than 2048 characters');
  // Before parsing: the parser drops an empty userinfo (`s3://@bucket`, `s3://:@bucket`).
  if (authorityOf(raw).includes('@'))
    return bad('destination must not embed credentials (nothing before "@", not even an empty name)');
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return bad('destination is not a URL (file:///dir or s3://bucket/prefix)');
  }
  if (u.username || u.password)
    return bad('destination must not embed credentials (nothing before "@", not even an empty name)');
  if (u.search || raw.includes('?')) return bad('destination must not have a query string');
  if (u.hash || raw.includes('#')) return bad('destination must not have a fragment');
  const segments = (path: string) => {
    const parts = path.split('/').filter((s) => s !== '');
    for (const p of parts) {
      let decoded: string;
      try {
        decoded = decodeURIComponent(p);
      } catch {
        return undefined;
      }
      if (decoded !== p || p === '.' || p === '..' || !SEGMENT.test(p)) return undefined;
    }
    return parts;
  };
  if (u.protocol === 'file:') {
    if (!/^file:\/\/\//i.test(raw) || u.host !== '')
      return bad('file: destinations are file:///absolute/path (no host)');
    const parts = segments(raw.slice('file://'.length));
    if (!parts || parts.length === 0)
      return bad('file: destination path segments must be letters, digits or ._~+=@,- (no . or ..)');
    const path = `/${parts.join('/')}`;
    return { ok: true, value: { scheme: 'file', path, url: `file://${path}` } };
  }
  if (u.protocol === 's3:') {
    const m = /^s3:\/\/([^/]*)(\/.*)?$/i.exec(raw);
    if (!m) return bad('s3: destinations are s3://bucket/prefix');
    const bucket = m[1] ?? '';
    if (bucket === '') return bad('s3: destination needs a bucket name (s3://bucket/prefix)');
    if (!S3_BUCKET.test(bucket) || bucket.includes('..'))
      return bad('s3: bucket must be 3-63 lowercase letters, digits, "." or "-"');
    const parts = segments(m[2] ?? '');
    if (!parts) return bad('s3: prefix segments must be letters, digits or ._~+=@,- (no . or ..)');
    const prefix = parts.join('/');
    return {
      ok: true,
      value: { scheme: 's3', bucket, prefix, url: `s3://${bucket}${prefix ? `/${prefix}` : ''}` },
    };
  }
  return bad('destination scheme must be file: or s3:');
}

/**
 * The authority of a destination as written: after `<scheme>://` (tabs and newlines dropped, as
 * the URL parser drops them) up to the first `/`, `?` or `#`; empty when there is none.
 */
function authorityOf(raw: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the URL parser drops these, so must we
  const input = raw.replace(/[\t\n\r]/g, '').replace(/^[\u0000-\u0020]+/, '');
  return /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(input)?.[1] ?? '';
}

/**
 * The one normal form of a destination: `url` of {@link parseDestination} (`file:///d/` and
 * `file:///d//` are `file:///d`, `S3://b/p/` is `s3://b/p`), so that one directory or prefix is
 * stored and compared as one string whatever route it came in by; `undefined` when it is not a
 * destination.
 *
 * @example normalDestination('file:///srv/exports/') // 'file:///srv/exports'
 */
export function normalDestination(raw: string): string | undefined {
  const r = parseDestination(raw);
  return r.ok ? r.value.url : undefined;
}

/**
 * `z` field holding a destination, checked by {@link parseDestination} and read as its normal
 * form ({@link normalDestination}): every route taking a destination stores the same string.
 */
export const destination = () =>
  text(2048, 1)
    .check((ctx) => {
      const r = parseDestination(ctx.value);
      if (!r.ok) ctx.issues.push({ code: 'custom', message: r.reason, input: ctx.value });
    })
    .overwrite((v) => normalDestination(v) ?? v);

const hex64 = z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 hex digits (sha256)');

/** `POST /v1/snapshots/{id}/export` (agent). */
export const SnapshotExportRequest = z
  .strictObject({ destination: destination() })
  .meta({ id: 'SnapshotExportRequest' });
export type SnapshotExportRequest = z.infer<typeof SnapshotExportRequest>;

/**
 * `POST /v1/destinations/check` (agent): whether the agent would export to `destination` (a
 * `file://` one must lie under one of its export roots; an `s3://` one needs its S3 keys). `200`
 * with the normal form, else the refusal an export would get (`400`), before anything is recorded
 * or written.
 */
export const DestinationCheck = z
  .strictObject({ destination: destination() })
  .meta({ id: 'DestinationCheck' });
export type DestinationCheck = z.infer<typeof DestinationCheck>;

/** What an export wrote and verified: `export_ref` is `<destination>/<snapshot_id>`. */
export const SnapshotExportResult = z
  .object({
    export_ref: text(2200),
    files: z.array(z.object({ name: text(64), size_bytes: z.number().int(), sha256: hex64 })),
    duration_ms: z.number().int(),
  })
  .meta({ id: 'SnapshotExportResult' });
export type SnapshotExportResult = z.infer<typeof SnapshotExportResult>;

/**
 * A transfer grant: what lets one agent read one snapshot's files from another agent
 * (`GET /v1/snapshots/{id}/files/{name}`) without holding that agent's token. orchd makes it for
 * a cross-host fetch as `<expires>.<hex HMAC-SHA256 under the source agent's token of
 * transferGrantMessage(id, expires)>`; the source agent accepts it, in the
 * {@link TRANSFER_GRANT_HEADER} header, on the file route of that snapshot only, until `expires`
 * (unix seconds; at most {@link TRANSFER_GRANT_MAX_SECONDS} ahead). Nothing else is reachable with it.
 */
export const TRANSFER_GRANT_HEADER = 'x-orch-transfer-grant';
/** The longest a transfer grant may live. */
export const TRANSFER_GRANT_MAX_SECONDS = 2 * 3600;
/** What a transfer grant's HMAC covers: a version tag, the snapshot id and the expiry. */
export const transferGrantMessage = (snapshotId: string, expires: number): string =>
  `orch-transfer-grant-v1\n${snapshotId}\n${expires}`;
/** A transfer grant's form: `<unix seconds>.<64 hex digits>`. */
export const TRANSFER_GRANT = /^(\d{1,12})\.([0-9a-f]{64})$/;

/**
 * `POST /v1/snapshots/{id}/fetch` (agent): copy the artifact from another agent (its URL and a
 * transfer grant for that snapshot, never the agent's token) or from an export (`export_ref`),
 * verify `digest` (and `state_digest` for a live one), and install it.
 */
export const SnapshotFetchRequest = z
  .strictObject({
    digest: hex64,
    state_digest: hex64.optional(),
    source: z.union([
      z.strictObject({
        agent_url: text(2048, 1),
        grant: z.string().regex(TRANSFER_GRANT, 'must be a transfer grant (<expires>.<hmac>)'),
        snapshot_id: agentId().optional(),
      }),
      z.strictObject({ export_ref: destination() }),
    ]),
  })
  .meta({ id: 'SnapshotFetchRequest' });
export type SnapshotFetchRequest = z.infer<typeof SnapshotFetchRequest>;

/** The export manifest (`manifest.json` at the export reference). */
export const ExportManifest = z.object({
  format: z.literal('orch-snapshot/1'),
  snapshot_id: text(64),
  kind: z.enum(['disk', 'live']),
  digest: hex64,
  state_digest: hex64.optional(),
  files: z.array(
    z.object({ name: z.enum(ARTIFACT_FILES), size_bytes: z.number().int().nonnegative(), sha256: hex64 }),
  ),
});
export type ExportManifest = z.infer<typeof ExportManifest>;
