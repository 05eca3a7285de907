import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Destination } from '@orch/protocol';
import { AgentError } from '../errors.js';

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

/** The store at `ref` (`<destination>/<snapshot id>`, already checked by `parseDestination`). */
export function openStore(ref: Destination, s3: S3Settings): ObjectStore {
  return ref.scheme === 'file' ? new FileStore(ref.path) : new S3Store(ref.bucket, ref.prefix, s3);
}

class FileStore implements ObjectStore {
  constructor(private readonly dir: string) {}

  async put(name: string, file: string): Promise<Written> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const target = join(this.dir, name);
    const partial = `${target}.partial`;
    const h = hashing();
    await pipeline(createReadStream(file), h, createWriteStream(partial, { mode: 0o600 }));
    const fh = await open(partial, 'r');
    await fh.sync().finally(() => fh.close());
    await rename(partial, target);
    return h.result();
  }

  async putText(name: string, body: string): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const target = join(this.dir, name);
    await pipeline(
      Readable.from([Buffer.from(body)]),
      createWriteStream(`${target}.partial`, { mode: 0o600 }),
    );
    await rename(`${target}.partial`, target);
  }

  async get(name: string): Promise<Readable> {
    const path = join(this.dir, name);
    try {
      await stat(path);
    } catch {
      throw AgentError.notFound('export file', path);
    }
    return createReadStream(path);
  }

  /** For tests and diagnostics: the text of `name`. */
  async text(name: string): Promise<string> {
    return readFile(join(this.dir, name), 'utf8');
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

/** Removes a file:// export's partial files after a failure (S3 uploads abort on their own). */
export async function cleanPartial(dir: string, name: string): Promise<void> {
  await rm(join(dir, `${name}.partial`), { force: true });
}
