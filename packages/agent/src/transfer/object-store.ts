import { createHash } from 'node:crypto';
import { createReadStream, constants as fsConstants } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Destination } from '@orch/protocol';
import { AgentError } from '../errors.js';
import type { ExportRoots } from './export-roots.js';

/** How `s3://` destinations are reached: the agent's configuration (credentials never logged or returned). */
export interface S3Settings {
  /** `http(s)://host:port` of an S3-compatible server; empty for AWS. */
  readonly endpoint: string;
  readonly region: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly forcePathStyle: boolean;
  /** Multipart part size; a file larger than one part is uploaded in parts. */
  readonly partSizeBytes: number;
}

/** Bytes and sha256 of what passed through. */
export interface Written {
  readonly size: number;
  readonly sha256: string;
}

/**
 * One export location (`<destination>/<snapshot id>/`): files written whole (never half-visible
 * under their final name) and read back as streams. `file://` writes `name.partial`, fsyncs and
 * renames; `s3://` uploads with `@aws-sdk/lib-storage` (multipart past one part).
 */
export interface ObjectStore {
  put(name: string, file: string): Promise<Written>;
  putText(name: string, body: string): Promise<void>;
  get(name: string): Promise<Readable>;
}

/** A hashing pass-through. */
export function hashing(): Transform & { result: () => Written } {
  const h = createHash('sha256');
  let size = 0;
  const t = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      h.update(chunk);
      size += chunk.length;
      cb(null, chunk);
    },
  }) as Transform & { result: () => Written };
  t.result = () => ({ size, sha256: h.digest('hex') });
  return t;
}

/** sha256 and size of a readable stream's bytes (consumes it). */
export async function hashStream(stream: Readable): Promise<Written> {
  const h = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    h.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { size, sha256: h.digest('hex') };
}

export async function hashFile(path: string): Promise<Written> {
  return hashStream(createReadStream(path));
}

/**
 * The store at `ref` (`<destination>/<snapshot id>`, already checked by `parseDestination`). A
 * `file://` one must lie under an export root (`roots`, checked on its real path; nothing is
 * created before); `field` names the request field in a refusal.
 */
export async function openStore(
  ref: Destination,
  s3: S3Settings,
  roots: ExportRoots,
  field: string,
): Promise<ObjectStore> {
  if (ref.scheme === 's3') return new S3Store(ref.bucket, ref.prefix, s3);
  return new FileStore(await roots.resolve(ref.path, field), roots, field);
}

/** `O_NOFOLLOW`: a file whose last component is a symlink is never opened through it. */
const NOFOLLOW = fsConstants.O_NOFOLLOW;

class FileStore implements ObjectStore {
  /** `dir` is the real path {@link ExportRoots.resolve} checked. */
  constructor(
    private readonly dir: string,
    private readonly roots: ExportRoots,
    private readonly field: string,
  ) {}

  /** Creates the directory (what is missing, 0700) and checks it is still the real path checked. */
  private async prepare(name: string): Promise<string> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await this.roots.recheck(this.dir, this.field);
    const partial = join(this.dir, `${name}.partial`);
    await rm(partial, { force: true });
    return partial;
  }

  /** A new file opened for writing: never through a symlink, never over an existing one. */
  private async writeStream(partial: string) {
    const flags = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | NOFOLLOW;
    return (await open(partial, flags, 0o600)).createWriteStream();
  }

  async put(name: string, file: string): Promise<Written> {
    const partial = await this.prepare(name);
    const h = hashing();
    await pipeline(createReadStream(file), h, await this.writeStream(partial));
    const fh = await open(partial, 'r');
    await fh.sync().finally(() => fh.close());
    await rename(partial, join(this.dir, name));
    return h.result();
  }

  async putText(name: string, body: string): Promise<void> {
    const partial = await this.prepare(name);
    await pipeline(Readable.from([Buffer.from(body)]), await this.writeStream(partial));
    await rename(partial, join(this.dir, name));
  }

  async get(name: string): Promise<Readable> {
    const path = join(this.dir, name);
    try {
      const fh = await open(path, fsConstants.O_RDONLY | NOFOLLOW);
      return fh.createReadStream();
    } catch {
      throw AgentError.notFound('export file', path);
    }
  }
}

class S3Store implements ObjectStore {
  private readonly client: S3Client;
  constructor(
    private readonly bucket: string,
    private readonly prefix: string,
    private readonly s3: S3Settings,
  ) {
    if (!s3.accessKeyId || !s3.secretAccessKey) {
      throw AgentError.invalid(
        's3:// destinations need AGENT_S3_ACCESS_KEY_ID and AGENT_S3_SECRET_ACCESS_KEY on this agent',
        { field: 'destination' },
      );
    }
    this.client = new S3Client({
      region: s3.region,
      ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
      forcePathStyle: s3.forcePathStyle,
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
      // Third-party S3 servers may refuse the CRC32 checksums the SDK adds by default since 2025.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 3,
    });
  }

  private key(name: string): string {
    return this.prefix ? `${this.prefix}/${name}` : name;
  }

  async put(name: string, file: string): Promise<Written> {
    const h = hashing();
    const size = (await stat(file)).size;
    const body = createReadStream(file).pipe(h);
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: this.key(name), Body: body, ContentLength: size },
      partSize: this.s3.partSizeBytes,
      queueSize: 2,
      leavePartsOnError: false,
    });
    await this.call(name, () => upload.done());
    const head = await this.call(name, () =>
      this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.key(name) })),
    );
    if (head.ContentLength !== size)
      throw AgentError.unavailable(
        `export of ${name}: the server holds ${head.ContentLength} bytes, not ${size}`,
      );
    return h.result();
  }

  async putText(name: string, body: string): Promise<void> {
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: this.key(name), Body: body, ContentType: 'application/json' },
    });
    await this.call(name, () => upload.done());
  }

  async get(name: string): Promise<Readable> {
    const out = await this.call(name, () =>
      this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.key(name) })),
    );
    if (!out.Body) throw AgentError.unavailable(`s3://${this.bucket}/${this.key(name)}: empty answer`);
    return out.Body as Readable;
  }

  /** Runs an S3 call; its failure becomes an AgentError whose text never holds a credential. */
  private async call<T>(name: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
      const where = `s3://${this.bucket}/${this.key(name)}`;
      let msg = `${e.name ?? 'Error'}: ${e.message ?? String(err)}`;
      for (const secret of [this.s3.secretAccessKey, this.s3.accessKeyId])
        msg = msg.split(secret).join('***');
      if (e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404)
        throw AgentError.notFound('export object', where);
      throw AgentError.unavailable(`${where}: ${msg.slice(0, 500)}`);
    }
  }
}
