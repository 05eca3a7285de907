import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import {
  AgentInfo,
  CreateApiKeyRequest,
  CreateEnvironmentRequest,
  CreateSnapshotBody,
  cleanText,
  EnvironmentListQuery,
  ExecRequest,
  LoginRequest,
  RegisterHostRequest,
  RestoreSnapshotBody,
  SnapshotListQuery,
  textProblem,
} from './index.js';

/** Strings with at least one NUL or lone surrogate somewhere. */
const badText = fc
  .tuple(
    fc.string({ unit: 'binary' }),
    fc.constantFrom('\u0000', '\ud800', '\udfff', '\udbff'),
    fc.string({ unit: 'binary' }),
  )
  .map(([a, bad, b]) => `${a}${bad}${b}`)
  .filter((s) => textProblem(s) !== undefined);
/** Well-formed strings (any code point, astral included) without NUL. */
const goodText = fc.string({ unit: 'grapheme' }).filter((s) => !s.includes('\u0000'));

describe('the text rule', () => {
  test('refuses every string with a NUL or a lone surrogate, accepts every other', () => {
    fc.assert(fc.property(badText, (s) => textProblem(s) !== undefined));
    fc.assert(fc.property(goodText, (s) => textProblem(s) === undefined));
  });

  test('cleanText makes any string keep it', () => {
    fc.assert(fc.property(fc.string({ unit: 'binary' }), (s) => textProblem(cleanText(s)) === undefined));
  });

  test('every string field and user key of every request schema keeps it', () => {
    const valid: [string, { safeParse: (v: unknown) => { success: boolean } }, Record<string, unknown>][] = [
      [
        'RegisterHostRequest',
        RegisterHostRequest,
        { id: 'h1', kind: 'microvm', agent_url: 'http://a:1', agent_token: 't', labels: { k: 'v' } },
      ],
      ['CreateApiKeyRequest', CreateApiKeyRequest, { label: 'l' }],
      ['LoginRequest', LoginRequest, { token: 't' }],
      [
        'CreateEnvironmentRequest',
        CreateEnvironmentRequest,
        {
          task_id: 't',
          spec: {
            cpus: 1,
            ram_mb: 256,
            storage_gb: 1,
            max_runtime_seconds: 1,
            image: 'i',
            gpu: { model: 'm', count: 1, mig: 'g' },
          },
          manifest_inline: 'e30=',
          secrets: { s: 'v' },
          startup_script: 'x',
          expose: [{ port: 80, as: 'web' }],
          required_secrets: ['s'],
          seed_snapshot_id: 'snap_1',
        },
      ],
      [
        'CreateSnapshotBody',
        CreateSnapshotBody,
        { mode: 'm', comment: 'c', export_destination: 'file:///d', export_status: 's' },
      ],
      ['RestoreSnapshotBody', RestoreSnapshotBody, { task_id: 't' }],
      ['ExecRequest', ExecRequest, { argv: ['a'], env: { A: 'b' }, cwd: '/', stdin_base64: 'aGk=' }],
      ['EnvironmentListQuery', EnvironmentListQuery, { task_id: 't', host_id: 'h' }],
      ['SnapshotListQuery', SnapshotListQuery, { vm_id: 'v', task_id: 't' }],
      [
        'AgentInfo',
        AgentInfo,
        {
          id: 'a',
          kind: 'microvm',
          arch: 'amd64',
          version: 'v',
          accelerator: 'tcg',
          capacity: { cpus: 1, ram_mb: 1, disk_gb: 1 },
          free: { cpus: 1, ram_mb: 1, disk_gb: 1 },
          images: ['i'],
          gpus: [{ model: 'm', count: 1, free: 1, mig_profiles: ['p'] }],
        },
      ],
    ];
    const userKeyed = new Set(['labels', 'secrets', 'env']);
    let checked = 0;
    for (const [name, schema, body] of valid) {
      expect(schema.safeParse(body).success, name).toBe(true);
      const visit = (value: unknown, replace: (v: unknown) => unknown, key: string) => {
        if (typeof value === 'string') {
          for (const bad of ['a\u0000', '\ud800']) {
            expect(schema.safeParse(replace(bad)).success, `${name}.${key} = ${JSON.stringify(bad)}`).toBe(
              false,
            );
            checked++;
          }
        } else if (Array.isArray(value)) {
          value.forEach((v, i) => {
            visit(v, (n) => replace(value.map((x, j) => (j === i ? n : x))), `${key}.${i}`);
          });
        } else if (value && typeof value === 'object') {
          for (const [k, v] of Object.entries(value)) {
            visit(v, (n) => replace({ ...value, [k]: n }), `${key}.${k}`);
            if (userKeyed.has(key.split('.').pop()!)) {
              expect(
                schema.safeParse(replace({ ...value, [`${k}\u0000`]: v })).success,
                `${name}.${key} key`,
              ).toBe(false);
              checked++;
            }
          }
        }
      };
      visit(body, (v) => v, '');
    }
    expect(checked).toBeGreaterThan(60);
  });
});
