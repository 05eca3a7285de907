import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RegistryConfig } from '../config.js';
import { AgentError } from '../errors.js';
import type { ImageStore } from './image-store.js';
import type { Layout } from './layout.js';
import { checkImageName, importWithSkopeo } from './oci-import.js';

/** A parsed registry reference: `host[:port]/path/name[:tag|@sha256:hex]`. */
export interface RegistryRef {
  readonly registry: string;
  readonly repository: string;
  readonly tag?: string;
  readonly digest?: string;
}

const REPO_PART = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;

/**
 * Parses `[docker://]host[:port]/name[:tag|@sha256:...]`. The registry host is required (no
 * implicit Docker Hub: this agent pulls only from registries the operator names).
 */
export function parseRegistryRef(input: string): RegistryRef {
  const ref = input.replace(/^docker:\/\//, '');
  const bad = (why: string) =>
    AgentError.invalid(`image reference ${JSON.stringify(input)}: ${why}`, { ref: input });
  const slash = ref.indexOf('/');
  if (slash <= 0) throw bad('name the registry, as host[:port]/name[:tag] or host[:port]/name@sha256:...');
  const registry = ref.slice(0, slash);
  if (!/^[A-Za-z0-9.-]+(:\d{1,5})?$/.test(registry))
    throw bad(`${JSON.stringify(registry)} is not host[:port]`);
  let rest = ref.slice(slash + 1);
  let digest: string | undefined;
  let tag: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!/^sha256:[a-f0-9]{64}$/.test(digest)) throw bad('the digest must be sha256: and 64 hex digits');
  }
  const colon = rest.lastIndexOf(':');
  if (colon >= 0) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(tag)) throw bad(`${JSON.stringify(tag)} is not a tag`);
  }
  if (rest === '' || !rest.split('/').every((p) => REPO_PART.test(p))) {
    throw bad(`${JSON.stringify(rest)} is not a repository name`);
  }
  return { registry, repository: rest, ...(tag ? { tag } : {}), ...(digest ? { digest } : {}) };
}

/** The canonical `docker://` form of a reference (tag `latest` when neither tag nor digest is given). */
export function formatRegistryRef(r: RegistryRef): string {
  const suffix = r.digest ? `${r.tag ? `:${r.tag}` : ''}@${r.digest}` : `:${r.tag ?? 'latest'}`;
  return `docker://${r.registry}/${r.repository}${suffix}`;
}

/** The image name a pull stores under when none is given: `<last path part>-<tag>` (or the digest's first 12 hex digits). */
export function defaultImageName(r: RegistryRef): string {
  const base = r.repository.split('/').at(-1)!;
  const version = r.tag ?? (r.digest ? r.digest.slice(7, 19) : 'latest');
  return `${base}-${version}`
    .toLowerCase()
    .replace(/[^a-z0-9._-]/g, '-')
    .slice(0, 63);
}

/**
 * `orch-agent image pull REF [NAME]`: copies the image from its registry with skopeo and imports it
 * like an OCI archive. Credentials (`AGENT_REGISTRY_CREDENTIALS`) go to skopeo in an auth file
 * (mode 0600, in a private directory, deleted afterwards), never on its command line or in a
 * message. TLS verification is on unless `AGENT_REGISTRY_TLS_VERIFY=false`; extra CAs come from
 * `AGENT_REGISTRY_CERT_DIR`.
 */
export async function pullImage(
  store: ImageStore,
  layout: Layout,
  registry: RegistryConfig,
  input: string,
  name?: string,
): Promise<{ name: string; source: string }> {
  const ref = parseRegistryRef(input);
  const imageName = name ?? defaultImageName(ref);
  checkImageName(layout, imageName);
  const source = formatRegistryRef(ref);
  const args = [`--src-tls-verify=${registry.tlsVerify}`];
  if (registry.certDir) args.push('--src-cert-dir', registry.certDir);
  const secretDir = registry.credentials ? await mkdtemp(join(tmpdir(), 'orch-agent-auth-')) : undefined;
  const scrub: string[] = [];
  try {
    if (secretDir) {
      const authFile = join(secretDir, 'auth.json');
      const [user] = registry.credentials.split(':');
      scrub.push(registry.credentials, registry.credentials.slice(user!.length + 1));
      const auth = Buffer.from(registry.credentials).toString('base64');
      scrub.push(auth);
      await writeFile(authFile, JSON.stringify({ auths: { [ref.registry]: { auth } } }), { mode: 0o600 });
      args.push('--src-authfile', authFile);
    } else {
      args.push('--src-no-creds');
    }
    await importWithSkopeo(store, layout, imageName, source, source, args, scrub);
    return { name: imageName, source };
  } finally {
    if (secretDir) await rm(secretDir, { recursive: true, force: true });
  }
}
