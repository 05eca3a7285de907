import { z } from 'zod';
import { base64Problem, decodeBase64 } from './base64.js';
import { OrchError } from './errors.js';
import { protoKeyPath, protoKeyProblem } from './json-body.js';
import { Manifest } from './manifest.js';
import { MAX_SERVICES, serviceImageName } from './rules.js';

/**
 * Manifest services (orchestrator.md, "Manifest"): each `services.<name>` runs as an OCI container
 * inside the environment's VM (the agent's README, "Services"). These are the pieces orchd and the
 * agent share: the service name rule, how a service's `image` names an agent image, the manifest
 * reader both use, and the status record the agent reports and the environment carries.
 */

/** A service of the manifest, as the guest runs it. */
export interface ManifestService {
  readonly name: string;
  /** The image as the definition wrote it (`postgres:16`). */
  readonly image: string;
  /** The agent image it runs ({@link serviceImageName}). */
  readonly imageName: string;
  readonly ports: readonly number[];
  /** In file order: a literal value, or the name of a secret. */
  readonly env: readonly { readonly name: string; readonly value?: string; readonly secret?: string }[];
}

export { MAX_SERVICES, serviceImageName };

/**
 * The manifest JSON text that `manifest_inline` carries: canonical base64 (base64.ts: standard
 * alphabet, padded, no whitespace or line breaks) of UTF-8. Anything else is refused as
 * `invalid_argument` naming the field and what is wrong (`manifest_inline: must be base64 (...):
 * it has a line break at character 77 ...`), never decoded leniently. The one decoder of orchd
 * and the agent.
 *
 * @example manifestServices(decodeManifestInline(req.manifest_inline))
 */
export function decodeManifestInline(manifestInline: string): string {
  const bytes = decodeBase64(manifestInline);
  if (!bytes)
    throw OrchError.invalid(`manifest_inline: ${base64Problem(manifestInline)}`, {
      field: 'manifest_inline',
    });
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw OrchError.invalid('manifest_inline: the decoded manifest is not UTF-8 text', {
      field: 'manifest_inline',
    });
  }
}

/**
 * The services of a manifest (its JSON text), in file order. Refuses, as `invalid_argument` naming
 * the field (`manifest_inline: services.db.env.PW: ...`), a manifest that is not JSON of the
 * {@link Manifest} shape (a version other than `"1"`, a relative workspace, an env entry with both
 * a value and a secret, an unknown field, a service name outside the rule: `serviceNameProblem`
 * of rules.ts; a service image naming no agent image: `serviceImageProblem`; an env name that is
 * no variable name: `envNameProblem`), a `__proto__` key anywhere (json-body.ts), or more
 * than {@link MAX_SERVICES} services.
 */
export function manifestServices(manifestJson: string): ManifestService[] {
  let json: unknown;
  try {
    json = JSON.parse(manifestJson);
  } catch {
    throw OrchError.invalid('manifest_inline: the decoded manifest is not JSON', {
      field: 'manifest_inline',
    });
  }
  const protoKey = protoKeyPath(json);
  if (protoKey !== undefined)
    throw OrchError.invalid(`manifest_inline: ${protoKeyProblem(protoKey)}`, {
      field: 'manifest_inline',
      path: protoKey,
    });
  const parsed = Manifest.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    // A path holds the caller's keys (a service name, an env name): at most 200 characters of it.
    const full = issue?.path.join('.') ?? '';
    const path = full.length > 200 ? `${full.slice(0, 200)}...` : full;
    throw OrchError.invalid(`manifest_inline: ${path === '' ? 'the manifest' : path}: ${issue?.message}`, {
      field: 'manifest_inline',
      ...(path === '' ? {} : { path }),
    });
  }
  const entries = Object.entries(parsed.data.services ?? {});
  if (entries.length > MAX_SERVICES)
    throw OrchError.invalid(`manifest_inline: services: at most ${MAX_SERVICES}`, {
      field: 'manifest_inline',
      path: 'services',
    });
  return entries.map(([name, svc]) => {
    const env = Object.entries(svc.env ?? {}).map(([k, v]) => {
      if (typeof v === 'string') return { name: k, value: v };
      // The schema lets exactly one of the two through.
      return v.secret !== undefined ? { name: k, secret: v.secret } : { name: k, value: v.value ?? '' };
    });
    return { name, image: svc.image, imageName: serviceImageName(svc.image), ports: svc.ports ?? [], env };
  });
}

/**
 * Service states: `starting` (image being mounted), `running` (its process runs), `restarting`
 * (exited; waiting out the backoff), `failed` (exited too often in a row: not restarted),
 * `unknown` (the guest did not say yet, e.g. just after a cold boot).
 */
export const SERVICE_STATES = ['starting', 'running', 'restarting', 'failed', 'unknown'] as const;

/** A service of an environment as its agent last saw it. */
export const ServiceStatus = z
  .object({
    name: z.string(),
    image: z.string(),
    state: z.enum(SERVICE_STATES),
    /** Restarts so far (since the VM booted). */
    restarts: z.number().int().nonnegative(),
    /** The status of its last exit (128+N: killed by signal N); absent when it never exited. */
    exit_code: z.number().int().optional(),
    ports: z.array(z.number().int()),
  })
  .meta({ id: 'ServiceStatus' });
export type ServiceStatus = z.infer<typeof ServiceStatus>;
