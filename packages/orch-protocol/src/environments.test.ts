import { describe, expect, test } from 'vitest';
import { CreateEnvironmentRequest, ExecRequest, IdempotencyKey, VmSpec } from './index.js';

const valid = {
  task_id: 't',
  spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 60, gpu: { model: 'h100', count: 1 } },
  manifest_inline: 'e30=',
  secrets: { db_pw: 'v' },
  startup_script: 'x',
  expose: [{ port: 80, as: 'web' }],
};

/** The issues of parsing `body` with `schema`, as `field: message`. */
function issues(
  schema: { safeParse: (v: unknown) => { error?: { issues: { path: PropertyKey[]; message: string }[] } } },
  body: unknown,
) {
  return (schema.safeParse(body).error?.issues ?? []).map((i) => `${i.path.join('.')}: ${i.message}`);
}

describe('POST /v1/environments body', () => {
  test('a valid body passes', () => {
    expect(issues(CreateEnvironmentRequest, valid)).toEqual([]);
  });

  test('unknown fields inside spec, spec.gpu and expose entries are refused, naming them', () => {
    expect(issues(CreateEnvironmentRequest, { ...valid, spec: { ...valid.spec, x: 1 } })).toEqual([
      'spec: Unrecognized key: "x"',
    ]);
    expect(
      issues(CreateEnvironmentRequest, {
        ...valid,
        spec: { ...valid.spec, gpu: { model: 'h100', count: 1, y: 1 } },
      }),
    ).toEqual(['spec.gpu: Unrecognized key: "y"']);
    expect(issues(CreateEnvironmentRequest, { ...valid, expose: [{ port: 80, as: 'web', z: 1 }] })).toEqual([
      'expose.0: Unrecognized key: "z"',
    ]);
    expect(issues(VmSpec, { ...valid.spec, x: 1 })).toEqual([': Unrecognized key: "x"']);
  });

  test('expose names are unique', () => {
    const expose = [
      { port: 80, as: 'web' },
      { port: 81, as: 'api' },
      { port: 82, as: 'web' },
    ];
    expect(issues(CreateEnvironmentRequest, { ...valid, expose })).toEqual([
      'expose.2.as: "web" is already the name of expose[0]; names must be unique',
    ]);
  });

  test('secrets are keyed by secret names', () => {
    expect(issues(CreateEnvironmentRequest, { ...valid, secrets: { 'a b': 'x' } })).toEqual([
      'secrets.a b: must be a secret name: letters, digits and "_", starting with a letter or "_", at most 128, not "__proto__" or "ORCH_VM_SECRET"',
    ]);
  });

  test.each(['db.pw', 'db-pw', 'ORCH_VM_SECRET'])(
    'secret %j is refused: the agent exports every secret as a variable, and the per-VM secret has its own value',
    (name) => {
      expect(issues(CreateEnvironmentRequest, { ...valid, secrets: { [name]: 'x' } })).toEqual([
        `secrets.${name}: must be a secret name: letters, digits and "_", starting with a letter or "_", at most 128, not "__proto__" or "ORCH_VM_SECRET"`,
      ]);
    },
  );

  test.each([
    ['a\nb', 'must not contain control characters'],
    ['a\u007fb', 'must not contain control characters'],
    [' a', 'must not start or end with whitespace'],
    ['  ', 'must not be empty'],
    ['', 'must not be empty'],
  ])('task_id %j is refused: %s', (task_id, message) => {
    expect(issues(CreateEnvironmentRequest, { ...valid, task_id })).toEqual([`task_id: ${message}`]);
  });
});

describe('exec body', () => {
  test('stdin_base64 must be canonical base64', () => {
    expect(issues(ExecRequest, { argv: ['id'], stdin_base64: 'aGk=' })).toEqual([]);
    expect(issues(ExecRequest, { argv: ['id'], stdin_base64: '' })).toEqual([]);
    for (const [bad, why] of [
      ['!!!', 'it has "!" at character 1, outside the alphabet'],
      ['aGk', 'its length, 3, is not a multiple of 4 (is "=" padding missing?)'],
      ['a b=', 'it has whitespace at character 2 (no whitespace is accepted)'],
      ['aGk=\n', 'it has a line break at character 5 (no whitespace is accepted)'],
      ['aGl=', 'not canonical: the unused bits of "l" before the padding must be zero'],
    ])
      expect(issues(ExecRequest, { argv: ['id'], stdin_base64: bad })).toEqual([
        `stdin_base64: must be base64 (RFC 4648: A-Z a-z 0-9 + /, padded with =): ${why}`,
      ]);
  });
});

describe('manifest_inline', () => {
  test('is canonical base64, else refused naming the field and what is wrong', () => {
    const manifest = Buffer.from(JSON.stringify({ version: '1', machine: { workspace: '/w'.repeat(40) } }));
    const b64 = manifest.toString('base64');
    const url = Buffer.from('{"version":"1","x":">>>?"}').toString('base64url');
    expect(issues(CreateEnvironmentRequest, { ...valid, manifest_inline: b64 })).toEqual([]);
    const rule = 'must be base64 (RFC 4648: A-Z a-z 0-9 + /, padded with =)';
    for (const [bad, why] of [
      [b64.replace(/.{76}/, '$&\n'), 'it has a line break at character 77 (no whitespace is accepted)'],
      [`${b64}\n`, `it has a line break at character ${b64.length + 1} (no whitespace is accepted)`],
      ['e30=garbage', '"=" pads only the end, but it is at character 4'],
      [url, `it has "-" at character ${url.indexOf('-') + 1}: that is base64url, not base64`],
      ['e30', 'its length, 3, is not a multiple of 4 (is "=" padding missing?)'],
      ['e31=', 'not canonical: the unused bits of "1" before the padding must be zero'],
    ])
      expect(issues(CreateEnvironmentRequest, { ...valid, manifest_inline: bad })).toEqual([
        `manifest_inline: ${rule}: ${why}`,
      ]);
  });
});

describe('spec.image (imageNameProblem, the rule orch compile applies too)', () => {
  test('an image name is accepted; anything an agent cannot boot is refused naming the field', () => {
    expect(issues(VmSpec, { ...valid.spec, image: 'debian-12' })).toEqual([]);
    const rule =
      'must be an image name: 1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit';
    for (const image of ['Debian 12', 'debian:12', '', 'a'.repeat(64), '..'])
      expect(issues(CreateEnvironmentRequest, { ...valid, spec: { ...valid.spec, image } })).toEqual([
        `spec.image: ${rule}`,
      ]);
  });
});

describe('IdempotencyKey', () => {
  test('a UUID, a ULID and a job id pass; empty, spaces, control and non-ASCII characters and 256 characters do not', () => {
    for (const ok of ['3f2b8c4e-1d2a-4b7e-9c1f-2a3b4c5d6e7f', '01HZY3K8Q9', 'ci/job:42#1', 'x'.repeat(255)])
      expect(IdempotencyKey.safeParse(ok).success).toBe(true);
    for (const bad of ['', 'a b', 'a\tb', 'é', 'x'.repeat(256), 'a\nb'])
      expect(IdempotencyKey.safeParse(bad).success).toBe(false);
  });
});
