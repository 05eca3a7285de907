import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { AgentError, isDiskFull } from '../errors.js';
import { CommandError, run } from '../util/run.js';
import type { ImageConfig, ImageStore } from './image-store.js';
import type { Layout } from './layout.js';

/** The kinds of SOURCE `orch-agent image import NAME SOURCE` accepts. */
export type ImportSource =
  | { readonly kind: 'tarball'; readonly path: string }
  | { readonly kind: 'oci-archive' | 'docker-archive'; readonly path: string; readonly ref?: string }
  | { readonly kind: 'oci'; readonly path: string; readonly ref: string };

/** Refuses a name outside `IMAGE_NAME` before anything is read or written (the layout's one check and message). */
export function checkImageName(layout: Layout, name: string): void {
  layout.checkImageName(name, 'NAME');
}

/**
 * Parses SOURCE: `oci-archive:PATH[:REF]`, `oci:DIR:TAG`, `docker-archive:PATH[:REF]`, or a plain
 * path to a root filesystem tarball (`docker export`, a debootstrap tree tarred up).
 */
export function parseImportSource(source: string): ImportSource {
  const m = /^(oci-archive|docker-archive|oci):(.+)$/.exec(source);
  if (!m) return { kind: 'tarball', path: source };
  const kind = m[1] as 'oci-archive' | 'docker-archive' | 'oci';
  const rest = m[2]!;
  // PATH[:REF]: the reference is what follows the last ':' when the part before it exists.
  const colon = rest.lastIndexOf(':');
  const path = colon > 0 ? rest.slice(0, colon) : rest;
  const ref = colon > 0 ? rest.slice(colon + 1) : undefined;
  if (kind === 'oci') {
    if (!ref) throw AgentError.invalid(`oci:${rest}: name the tag too, as oci:DIR:TAG`, { source });
    return { kind, path, ref };
  }
  // An archive path that itself contains ':' and exists wins over the PATH:REF reading.
  if (ref !== undefined && existsSync(rest)) return { kind, path: rest };
  return ref ? { kind, path, ref } : { kind, path };
}

/** The skopeo transport string of a parsed source. */
function skopeoSource(src: Exclude<ImportSource, { kind: 'tarball' }>): string {
  const path = resolve(src.path);
  return src.ref ? `${src.kind}:${path}:${src.ref}` : `${src.kind}:${path}`;
}

/** What an OCI image brings besides its layers. */
export interface OciFacts {
  readonly manifestDigest: string;
  readonly config: ImageConfig;
}

/** Reads the one image of an OCI layout written by `skopeo copy ... oci:DIR:img`. */
export async function readOciLayout(dir: string): Promise<OciFacts> {
  const blob = async (digest: string) => {
    const [alg, hex] = digest.split(':');
    return JSON.parse(await readFile(join(dir, 'blobs', alg!, hex!), 'utf8')) as Record<string, unknown>;
  };
  const index = JSON.parse(await readFile(join(dir, 'index.json'), 'utf8')) as {
    manifests: { digest: string }[];
  };
  const manifestDigest = index.manifests[0]?.digest;
  if (!manifestDigest) throw AgentError.invalid('the image has no manifest');
  const manifest = (await blob(manifestDigest)) as { config: { digest: string } };
  const config = ((await blob(manifest.config.digest)) as { config?: ImageConfig }).config ?? {};
  const kept: ImageConfig = {
    ...(config.Env ? { Env: config.Env } : {}),
    ...(config.Entrypoint ? { Entrypoint: config.Entrypoint } : {}),
    ...(config.Cmd ? { Cmd: config.Cmd } : {}),
    ...(config.WorkingDir ? { WorkingDir: config.WorkingDir } : {}),
    ...(config.User ? { User: config.User } : {}),
  };
  return { manifestDigest, config: kept };
}

/** Turns a failed skopeo/umoci run into a precise, non-sensitive error. */
export function describeToolFailure(what: string, err: unknown, scrub: readonly string[] = []): AgentError {
  if (isDiskFull(err)) return AgentError.diskFull(`no space left on the device while ${what}`);
  if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
    return AgentError.missingTool('skopeo/umoci', 'apt-get install skopeo umoci (or run orch-agent setup)');
  }
  let detail = err instanceof CommandError ? err.stderr.trim() : String(err);
  for (const s of scrub) if (s) detail = detail.split(s).join('***');
  const line =
    detail
      .split('\n')
      .map((l) =>
        l
          .replace(/^time="[^"]*" level=\w+ msg="?/, '')
          .replace(/"$/, '')
          .replace(/\\"/g, '"'),
      )
      .filter(Boolean)
      .at(-1) ?? 'failed';
  if (/no descriptor found for reference|manifest unknown|not found/i.test(line)) {
    return AgentError.invalid(`${what}: image or tag not found (${line})`, { reason: 'not_found' });
  }
  return AgentError.invalid(`${what}: ${line}`);
}

/**
 * Copies `skopeoSrc` into a fresh OCI layout with skopeo, unpacks it with umoci (layers in order,
 * whiteouts honoured) and builds image `name` from the result; `source` is recorded in image.json.
 * Everything is staged under the images directory and removed on failure: a refused import leaves
 * nothing behind and an existing image of that name untouched.
 */
export async function importWithSkopeo(
  store: ImageStore,
  layout: Layout,
  name: string,
  skopeoSrc: string,
  source: string,
  skopeoArgs: readonly string[] = [],
  scrub: readonly string[] = [],
): Promise<void> {
  checkImageName(layout, name);
  await mkdir(layout.imagesDir, { recursive: true });
  const work = await mkdtemp(join(layout.imagesDir, '.tmp-import-'));
  try {
    const oci = join(work, 'oci');
    try {
      // skopeo untars archives into its temporary directory: keep that on the data dir's filesystem.
      await run([
        'skopeo',
        '--insecure-policy',
        '--tmpdir',
        work,
        'copy',
        '--quiet',
        ...skopeoArgs,
        skopeoSrc,
        `oci:${oci}:img`,
      ]);
    } catch (err) {
      throw describeToolFailure(`cannot read ${source}`, err, scrub);
    }
    const facts = await readOciLayout(oci);
    const bundle = join(work, 'bundle');
    try {
      await run(['umoci', 'unpack', '--image', `${oci}:img`, bundle]);
    } catch (err) {
      throw describeToolFailure(`cannot unpack the layers of ${source}`, err, scrub);
    }
    await rm(oci, { recursive: true, force: true });
    await store.build(
      name,
      `imported from ${source}`,
      async (root) => {
        await rm(root, { recursive: true, force: true });
        await rename(join(bundle, 'rootfs'), root);
      },
      { source, manifest_digest: facts.manifestDigest, config: facts.config },
    );
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** `orch-agent image import NAME SOURCE` (see {@link parseImportSource}). */
export async function importImage(
  store: ImageStore,
  layout: Layout,
  name: string,
  source: string,
): Promise<void> {
  checkImageName(layout, name);
  const src = parseImportSource(source);
  if (!existsSync(src.path)) throw AgentError.invalid(`no such file or directory: ${src.path}`, { source });
  if (src.kind === 'tarball') {
    if (!(await stat(src.path)).isFile()) throw AgentError.invalid(`${src.path} is not a file`, { source });
    await store.build(
      name,
      `imported from ${src.path}`,
      async (root) => {
        try {
          await run(['tar', '--numeric-owner', '-xpf', src.path, '-C', root]);
        } catch (err) {
          if (isDiskFull(err)) throw err;
          throw describeToolFailure(`cannot extract ${src.path}`, err);
        }
      },
      { source: `tarball:${resolve(src.path)}` },
    );
    return;
  }
  const canonical = src.ref
    ? `${src.kind}:${resolve(src.path)}:${src.ref}`
    : `${src.kind}:${resolve(src.path)}`;
  await importWithSkopeo(store, layout, name, skopeoSource(src), canonical);
}
