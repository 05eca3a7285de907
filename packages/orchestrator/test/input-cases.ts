/**
 * Generated input cases for the fuzz suite: every JSON string field and user-keyed record of every
 * request body, each replaced by text that breaks the text rule of `@orch/protocol`.
 */

import fc from 'fast-check';
import type { OrchdProcess } from './orchd-process.js';

/** A valid create request (the shape `orch compile --format json` prints), with one secret reference. */
export function validEnvironment(secretName = 'db_pw', secrets: Record<string, string> = { db_pw: 'pw' }) {
  const manifest = {
    version: '1',
    services: { db: { image: 'postgres', env: { PW: { secret: secretName } } } },
  };
  return {
    task_id: 'fuzz',
    spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 600, image: 'debian-12' },
    manifest_inline: Buffer.from(JSON.stringify(manifest)).toString('base64'),
    secrets,
    startup_script: 'echo hi\n',
    expose: [{ port: 8080, as: 'web' }],
  };
}

/** Ids that no resource can have: NUL, invalid UTF-8 and malformed percent-encodings, traversal, length. */
export const badIds = [
  '%00',
  'a%00b',
  '%ff',
  '%c3%28',
  '%e2%82',
  '%',
  '%zz',
  '..%2F..%2Fvictim',
  '%2e%2e',
  encodeURIComponent('a\u0000b'),
  encodeURIComponent('\u{1F600}'),
  'x'.repeat(300),
  ...fc.sample(
    fc.string({ unit: 'binary', minLength: 1, maxLength: 10 }).map((s) => encodeURIComponent(`${s}\u0000`)),
    { numRuns: 10, seed: 7 },
  ),
];

/** Waits (up to 30 s) until an environment is in `state`. */
export async function waitForState(
  orchd: OrchdProcess,
  token: string,
  id: string,
  state: string,
): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const env = await orchd.request('GET', `/v1/environments/${id}`, { token });
    if ((env.body as { state?: string }).state === state) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`environment ${id} did not reach ${state}`);
}

/** Text no field accepts: a NUL, a lone high or low surrogate. */
export const badTextCases = ['a\u0000b', '\u0000', 'x\ud800', '\udc00y'];

/** One field of one request: `with(bad)` is the valid body with that field (or key) replaced. */
export interface FieldCase {
  readonly method: string;
  readonly path: string;
  /** What the error message starts with: the field's path (for a record key, the record's). */
  readonly field: string;
  readonly with: (bad: string) => unknown;
}

/** Objects whose keys are the caller's (a bad key is refused like a bad value). */
const RECORDS = new Set(['labels', 'secrets', 'env']);

/** Every string leaf and record key of `body`, as cases. */
function fieldCases(method: string, path: string, body: unknown): FieldCase[] {
  const cases: FieldCase[] = [];
  const walk = (value: unknown, at: (string | number)[]) => {
    if (typeof value === 'string') {
      cases.push({ method, path, field: at.join('.'), with: (bad) => replaceAt(body, at, () => bad) });
    } else if (Array.isArray(value)) {
      for (const [i, v] of value.entries()) walk(v, [...at, i]);
    } else if (typeof value === 'object' && value !== null) {
      const name = at[at.length - 1];
      for (const [k, v] of Object.entries(value)) {
        if (typeof name === 'string' && RECORDS.has(name)) {
          cases.push({
            method,
            path,
            field: at.join('.'),
            with: (bad) => replaceAt(body, at, (o) => ({ ...(o as object), [`${k}${bad}`]: v })),
          });
        }
        walk(v, [...at, k]);
      }
    }
  };
  walk(body, []);
  return cases;
}

function replaceAt(root: unknown, at: readonly (string | number)[], f: (old: unknown) => unknown): unknown {
  if (at.length === 0) return f(root);
  const [head, ...rest] = at;
  if (Array.isArray(root)) return root.map((v, i) => (i === head ? replaceAt(v, rest, f) : v));
  const o = root as Record<string, unknown>;
  return { ...o, [head!]: replaceAt(o[head!], rest, f) };
}

/** The cases of every request body orchd takes, around a running environment and a ready snapshot. */
export function jsonFieldCases(ctx: {
  envId: string;
  snapId: string;
  agentUrl: string;
  agentToken: string;
  environment: object;
}): FieldCase[] {
  return [
    ...fieldCases('POST', '/v1/hosts', {
      id: 'hx',
      kind: 'microvm',
      agent_url: ctx.agentUrl,
      agent_token: ctx.agentToken,
      labels: { team: 'a' },
    }),
    ...fieldCases('POST', '/v1/api-keys', { label: 'l' }),
    ...fieldCases('POST', '/login', { token: 't' }),
    ...fieldCases('POST', '/v1/environments', {
      ...ctx.environment,
      spec: {
        cpus: 1,
        ram_mb: 256,
        storage_gb: 1,
        max_runtime_seconds: 60,
        image: 'debian-12',
        gpu: { model: 'a100', count: 1, mig: '1g.5gb' },
      },
      required_secrets: ['db_pw'],
      seed_snapshot_id: ctx.snapId,
    }),
    ...fieldCases('POST', '/v1/builds', {
      task_id: 't',
      spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 60, image: 'debian-12' },
      workspace: '/w',
      setup: ['echo a'],
      secrets: { db_pw: 'pw' },
    }),
    ...fieldCases('POST', `/v1/environments/${ctx.envId}/snapshots`, {
      mode: 'm',
      comment: 'c',
      retention_until: '2030-01-01T00:00:00Z',
      export_destination: 'file:///x',
      export_status: 's',
    }),
    ...fieldCases('POST', `/v1/snapshots/${ctx.snapId}/restore`, { task_id: 't' }),
    ...fieldCases('POST', `/v1/environments/${ctx.envId}?action=exec`, {
      argv: ['echo', 'x'],
      env: { A: 'b' },
      cwd: '/',
      stdin_base64: 'aGk=',
    }),
  ];
}
