import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  ARTIFACT_FILES,
  type ArtifactFile,
  checkAgentUrl,
  EXPORT_MANIFEST,
  ExportManifest,
  parseDestination,
  type SnapshotArtifact,
  type SnapshotExportResult,
  type SnapshotFetchRequest,
  TRANSFER_GRANT_HEADER,
  TRANSFER_PATHS,
} from '@orch/protocol';
import type { Logger } from 'pino';
import { AgentError, isDiskFull } from '../errors.js';
import type { Layout } from '../images/layout.js';
import { artifactOf, type SnapshotMeta, type Snapshots } from '../vm/snapshots.js';
import type { ExportRoots } from './export-roots.js';
import {
  hashFile,
  hashing,
  hashStream,
  type ObjectStore,
  openStore,
  type S3Settings,
} from './object-store.js';

/** Largest `snapshot.json` or `manifest.json` read from a source. */
const MAX_META_BYTES = 1 << 20;

export interface TransferDeps {
  readonly layout: Layout;
  readonly snapshots: Snapshots;
  readonly s3: S3Settings;
  /** Where `file://` destinations and export references may be (the operator's export roots). */
  readonly roots: ExportRoots;
  readonly logger: Logger;
}

/**
 * Snapshots travelling between hosts: exports to `file://` and `s3://` destinations, and fetches
 * from another agent or from an export. Everything is verified by sha256: an export reads back
 * what it wrote; a fetch checks the disk against `digest` and the memory state against
 * `state_digest` as the caller (orchd's record) gives them, so a corrupted or substituted artifact
 * is refused (`409 conflict`, `details.reason: digest_mismatch`) and nothing is installed.
 */
export class ArtifactTransfer {
  constructor(private readonly deps: TransferDeps) {}

  /** The files of snapshot `id` that exist, `snapshot.json` first. */
  private async files(id: string): Promise<ArtifactFile[]> {
    const dir = this.deps.layout.snapshotDir(id);
    return ARTIFACT_FILES.filter((f) => existsSync(join(dir, f)));
  }

  /** `GET /v1/snapshots/{id}/files/{name}`: one file of the artifact. */
  async file(id: string, name: string): Promise<{ path: string; size: number }> {
    await this.deps.snapshots.meta(id);
    if (!(ARTIFACT_FILES as readonly string[]).includes(name))
      throw AgentError.notFound('artifact file', name);
    const path = join(this.deps.layout.snapshotDir(id), name);
    try {
      return { path, size: (await stat(path)).size };
    } catch {
      throw AgentError.notFound('artifact file', name);
    }
  }

  /**
   * `POST /v1/destinations/check`: whether this agent would export to `destination` (a `file://`
   * one under an export root, an `s3://` one with S3 keys configured), answered with its normal
   * form; the refusal an export would meet, before orchd records anything. Creates nothing.
   */
  async checkDestination(destination: string): Promise<{ destination: string }> {
    const dest = parseDestination(destination);
    if (!dest.ok) throw AgentError.invalid(`destination: ${dest.reason}`, { field: 'destination' });
    await openStore(dest.value, this.deps.s3, this.deps.roots, 'destination');
    return { destination: dest.value.url };
  }

  /**
   * `POST /v1/snapshots/{id}/export`: the artifact's files, then `manifest.json` (written last: an
   * export without it is incomplete), at `<destination>/<id>/`. The local files are checked against
   * the snapshot's own digests first; each written file is read back from the destination and
   * hashed again.
   */
  async exportTo(id: string, destination: string): Promise<SnapshotExportResult> {
    const started = Date.now();
    const meta = await this.deps.snapshots.meta(id);
    const dest = parseDestination(destination);
    if (!dest.ok) throw AgentError.invalid(`destination: ${dest.reason}`, { field: 'destination' });
    const ref = parseDestination(`${dest.value.url}/${id}`);
    if (!ref.ok) throw AgentError.invalid(`destination: ${ref.reason}`, { field: 'destination' });
    const store = await openStore(ref.value, this.deps.s3, this.deps.roots, 'destination');
    const dir = this.deps.layout.snapshotDir(id);
    const files: SnapshotExportResult['files'] = [];
    for (const name of await this.files(id)) {
      if (name === 'snapshot.json') continue;
      const path = join(dir, name);
      const local = await hashFile(path);
      expectDigest(name, local.sha256, expected(meta, name), `snapshot ${id} on this host`);
      const sent = await store.put(name, path);
      expectDigest(name, sent.sha256, local.sha256, 'the bytes sent');
      const back = await hashStream(await store.get(name));
      expectDigest(name, back.sha256, local.sha256, ref.value.url);
      files.push({ name, size_bytes: local.size, sha256: local.sha256 });
    }
    const metaPath = join(dir, 'snapshot.json');
    const metaSent = await store.put('snapshot.json', metaPath);
    files.unshift({ name: 'snapshot.json', size_bytes: metaSent.size, sha256: metaSent.sha256 });
    const manifest: ExportManifest = {
      format: 'orch-snapshot/1',
      snapshot_id: id,
      kind: meta.kind,
      digest: meta.digest,
      ...(meta.state_digest ? { state_digest: meta.state_digest } : {}),
      files: files.map((f) => ({ name: f.name as ArtifactFile, size_bytes: f.size_bytes, sha256: f.sha256 })),
    };
    await store.putText(EXPORT_MANIFEST, `${JSON.stringify(manifest, null, 2)}\n`);
    this.deps.logger.info(
      { snapshot: id, export_ref: ref.value.url, files: files.length },
      'snapshot exported',
    );
    return { export_ref: ref.value.url, files, duration_ms: Date.now() - started };
  }

  /**
   * `POST /v1/snapshots/{id}/fetch`: copies the artifact into a staging directory, verifies it,
   * then renames it into `snapshots/<id>`. Already here with the same digest: nothing to do.
   */
  async fetch(id: string, req: SnapshotFetchRequest): Promise<SnapshotArtifact> {
    const { layout, snapshots, logger } = this.deps;
    layout.checkSnapshotId(id);
    if (snapshots.exists(id)) {
      const have = await snapshots.meta(id);
      if (have.digest === req.digest) return artifactOf(have);
      throw AgentError.conflict(`snapshot ${id} is already on this host with another digest`, {
        reason: 'digest_mismatch',
      });
    }
    const source = await this.source(id, req);
    const staging = join(layout.snapshotsDir, `.fetch-${id}-${randomBytes(4).toString('hex')}`);
    await mkdir(staging, { recursive: true, mode: 0o700 });
    const started = Date.now();
    try {
      const meta = JSON.parse(await readText(await source.open('snapshot.json'))) as SnapshotMeta;
      if (meta.kind !== 'disk' && meta.kind !== 'live')
        throw AgentError.invalid('the source artifact has no kind');
      const stateDigest = req.state_digest ?? meta.state_digest;
      const want: ArtifactFile[] = [
        'disk.qcow2',
        ...(meta.kind === 'live' ? (['state.bin', 'startup.log'] as const) : []),
      ];
      let bytes = 0;
      for (const name of want) {
        let stream: Readable;
        try {
          stream = await source.open(name);
        } catch (err) {
          if (name === 'startup.log') continue;
          throw err;
        }
        const h = hashing();
        await pipeline(stream, h, createWriteStream(join(staging, name), { mode: 0o600 }));
        const got = h.result();
        bytes += got.size;
        if (name === 'disk.qcow2') expectDigest(name, got.sha256, req.digest, source.describe);
        if (name === 'state.bin') {
          if (!stateDigest) throw AgentError.invalid('a live artifact needs state_digest to be verified');
          expectDigest(name, got.sha256, stateDigest, source.describe);
        }
      }
      const installed: SnapshotMeta = {
        ...meta,
        snapshot_id: id,
        digest: req.digest,
        ...(stateDigest && meta.kind === 'live' ? { state_digest: stateDigest } : {}),
      };
      await writeFile(join(staging, 'snapshot.json'), `${JSON.stringify(installed, null, 2)}\n`);
      await rename(staging, layout.snapshotDir(id));
      logger.info(
        { snapshot: id, from: source.describe, bytes, ms: Date.now() - started },
        'snapshot fetched and verified',
      );
      return artifactOf(installed);
    } catch (err) {
      await rm(staging, { recursive: true, force: true });
      if (isDiskFull(err)) throw AgentError.diskFull('the host disk is full: cannot fetch the snapshot');
      if (err instanceof AgentError) throw err;
      throw AgentError.unavailable(
        `fetching snapshot ${id} from ${source.describe} failed: ${(err as Error).message}`,
      );
    }
  }

  /** Where a fetch reads from, checked before anything is dialled. */
  private async source(
    id: string,
    req: SnapshotFetchRequest,
  ): Promise<{ describe: string; open: (name: ArtifactFile) => Promise<Readable> }> {
    if ('export_ref' in req.source) {
      const ref = parseDestination(req.source.export_ref);
      if (!ref.ok)
        throw AgentError.invalid(`source.export_ref: ${ref.reason}`, { field: 'source.export_ref' });
      const store: ObjectStore = await openStore(
        ref.value,
        this.deps.s3,
        this.deps.roots,
        'source.export_ref',
      );
      let manifest: Promise<ExportManifest> | undefined;
      const readManifest = async () => {
        const parsed = ExportManifest.safeParse(JSON.parse(await readText(await store.get(EXPORT_MANIFEST))));
        if (!parsed.success)
          throw AgentError.invalid(`${ref.value.url}: ${EXPORT_MANIFEST} is not an orch snapshot export`);
        return parsed.data;
      };
      return {
        describe: ref.value.url,
        open: async (name) => {
          manifest ??= readManifest();
          const m = await manifest;
          if (!m.files.some((f) => f.name === name)) throw AgentError.notFound('export file', name);
          return store.get(name);
        },
      };
    }
    const checked = checkAgentUrl(req.source.agent_url);
    if (!checked.ok)
      throw AgentError.invalid(`source.agent_url: ${checked.reason}`, { field: 'source.agent_url' });
    const base = checked.url;
    const grant = req.source.grant;
    const remoteId = req.source.snapshot_id ?? id;
    return {
      describe: `${base} (snapshot ${remoteId})`,
      open: async (name) => {
        let res: Response;
        try {
          res = await fetch(`${base}${TRANSFER_PATHS.snapshotFile(remoteId, name)}`, {
            headers: { [TRANSFER_GRANT_HEADER]: grant },
            redirect: 'manual',
          });
        } catch (err) {
          throw AgentError.unavailable(`source agent ${base} cannot be reached: ${(err as Error).message}`);
        }
        if (res.status === 404) {
          await res.body?.cancel();
          throw AgentError.notFound('artifact file', `${remoteId}/${name}`);
        }
        if (res.status !== 200 || !res.body) {
          await res.body?.cancel();
          throw AgentError.unavailable(`source agent ${base} answered ${res.status} for ${name}`);
        }
        return Readable.fromWeb(res.body as import('node:stream/web').ReadableStream);
      },
    };
  }
}

/** The digest a file of the artifact must have, from its metadata (undefined: not recorded). */
function expected(meta: SnapshotMeta, name: ArtifactFile): string | undefined {
  if (name === 'disk.qcow2') return meta.digest;
  if (name === 'state.bin') return meta.state_digest;
  return undefined;
}

function expectDigest(name: string, actual: string, want: string | undefined, where: string): void {
  if (want === undefined || actual === want) return;
  throw AgentError.conflict(
    `${name} from ${where} does not match its digest (sha256 ${actual.slice(0, 16)}..., expected ${want.slice(0, 16)}...): refused`,
    { reason: 'digest_mismatch', file: name },
  );
}

async function readText(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of stream) {
    n += (c as Buffer).length;
    if (n > MAX_META_BYTES) {
      stream.destroy();
      throw AgentError.invalid('artifact metadata is larger than 1 MiB');
    }
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
