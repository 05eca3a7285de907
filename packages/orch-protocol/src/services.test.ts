import { describe, expect, test } from 'vitest';
import { OrchError } from './errors.js';
import { IMAGE_NAME } from './ids.js';
import { MAX_SERVICES, manifestServices, serviceImageName } from './services.js';

describe('services of a manifest', () => {
  test('a service image names a host image directly, or by the name an image pull gives it', () => {
    expect(serviceImageName('websvc')).toBe('websvc');
    expect(serviceImageName('debian-12')).toBe('debian-12');
    expect(serviceImageName('postgres:16')).toBe('postgres-16');
    expect(serviceImageName('docker://reg.local:5000/lib/Web:1.2')).toBe('web-1.2');
    expect(serviceImageName('reg.local/redis')).toBe('redis-latest');
    expect(serviceImageName(`reg.local/app@sha256:${'ab'.repeat(32)}`)).toBe('app-abababababab');
    for (const ref of ['postgres:16', 'a/b/c:d', 'x@sha256:00', 'UPPER:Case'])
      expect(serviceImageName(ref)).toMatch(IMAGE_NAME);
  });

  test('read in file order with literals and secret references; bad names and shapes refused', () => {
    const svcs = manifestServices(
      JSON.stringify({
        version: '1',
        services: {
          db: {
            image: 'postgres:16',
            ports: [5432],
            env: { A: 'x', B: { value: 'y' }, C: { secret: 'pw' } },
          },
          cache: { image: 'redis' },
        },
      }),
    );
    expect(svcs).toEqual([
      {
        name: 'db',
        image: 'postgres:16',
        imageName: 'postgres-16',
        ports: [5432],
        env: [
          { name: 'A', value: 'x' },
          { name: 'B', value: 'y' },
          { name: 'C', secret: 'pw' },
        ],
      },
      { name: 'cache', image: 'redis', imageName: 'redis', ports: [], env: [] },
    ]);
    expect(manifestServices('{"version":"1"}')).toEqual([]);
    const refused = (json: string) => {
      try {
        manifestServices(json);
      } catch (e) {
        return e instanceof OrchError ? e.code : 'other';
      }
      return 'accepted';
    };
    expect(refused('not json')).toBe('invalid_argument');
    expect(refused(JSON.stringify({ services: { '../x': { image: 'a' } } }))).toBe('invalid_argument');
    expect(refused(JSON.stringify({ services: { a: { image: 'a', env: { 'A=B': '1' } } } }))).toBe(
      'invalid_argument',
    );
    expect(refused(JSON.stringify({ services: { a: { ports: [1] } } }))).toBe('invalid_argument');
    const many = Object.fromEntries(
      Array.from({ length: MAX_SERVICES + 1 }, (_, i) => [`s${i}`, { image: 'a' }]),
    );
    expect(refused(JSON.stringify({ services: many }))).toBe('invalid_argument');
  });

  test('the manifest is checked whole: version, workspace, env entries, unknown fields', () => {
    const message = (manifest: unknown) => {
      try {
        manifestServices(JSON.stringify(manifest));
      } catch (e) {
        return e instanceof OrchError ? `${e.code} ${e.message}` : 'other';
      }
      return 'accepted';
    };
    const ok = { version: '1', machine: { workspace: '/w' }, services: {} };
    expect(message(ok)).toBe('accepted');
    expect(message({ ...ok, version: '2' })).toBe(
      'invalid_argument manifest_inline: version: must be "1", the only manifest version',
    );
    expect(message({ ...ok, version: 1 })).toBe(
      'invalid_argument manifest_inline: version: must be "1", the only manifest version',
    );
    expect(message({ machine: ok.machine })).toBe(
      'invalid_argument manifest_inline: version: must be "1", the only manifest version',
    );
    expect(message({ ...ok, machine: { workspace: '../..' } })).toBe(
      'invalid_argument manifest_inline: machine.workspace: must be an absolute guest path (starting with "/")',
    );
    expect(message({ ...ok, extra: true })).toBe(
      'invalid_argument manifest_inline: the manifest: Unrecognized key: "extra"',
    );
    const env = (entry: unknown) => ({ ...ok, services: { db: { image: 'pg', env: { PW: entry } } } });
    expect(message(env({ value: 'v', secret: 'pw' }))).toBe(
      'invalid_argument manifest_inline: services.db.env.PW: sets both value and secret: keep one',
    );
    expect(message(env({}))).toBe(
      'invalid_argument manifest_inline: services.db.env.PW: needs "value" or "secret"',
    );
    expect(message(env({ secret: 'a b' }))).toContain('services.db.env.PW.secret: must be a secret name');
    for (const literal of ['a\u0000b', { value: 'a\u0000b' }])
      expect(message(env(literal))).toContain('services.db.env.PW');
    for (const name of ['db.pw', 'db-pw', 'ORCH_VM_SECRET'])
      expect(message(env({ secret: name }))).toContain('services.db.env.PW.secret: must be a secret name');
    expect(message(env(3))).toBe(
      'invalid_argument manifest_inline: services.db.env.PW: must be a string, { value: <string> } or { secret: <name> }',
    );
  });
});

describe('service names in the manifest', () => {
  const refusal = (name: string) => {
    try {
      manifestServices(JSON.stringify({ version: '1', services: { [name]: { image: 'debian-12' } } }));
    } catch (e) {
      if (e instanceof OrchError) return [e.code, e.message, e.details];
    }
    return 'accepted';
  };
  const RULE = 'must be 1-63 lower-case letters, digits, "_" or "-", starting with a letter';

  test.each(['db', 'web-2', 'a_b', 'a'.repeat(63)])('%j is a service name', (name) => {
    expect(refusal(name)).toBe('accepted');
  });

  test.each(['Web', 'web.1', '1db', '10', '-x', '', 'a'.repeat(64)])(
    '%j is refused, naming it and the rule',
    (name) => {
      expect(refusal(name)).toEqual([
        'invalid_argument',
        `manifest_inline: services.${name}: ${RULE}`,
        { field: 'manifest_inline', path: `services.${name}` },
      ]);
    },
  );

  test('a huge name is cut in the message', () => {
    const [, message] = refusal('X'.repeat(10_000)) as [string, string];
    expect(message).toBe(`manifest_inline: services.${'X'.repeat(191)}...: ${RULE}`);
  });
});

describe("a service's image (serviceImageProblem, the rule orch compile applies too)", () => {
  const message = (image: string) => {
    try {
      manifestServices(JSON.stringify({ version: '1', services: { db: { image } } }));
    } catch (e) {
      return e instanceof OrchError ? e.message : 'other';
    }
    return 'accepted';
  };

  test('an image name or an OCI reference whose image name a host can have is accepted', () => {
    for (const image of ['busybox-httpd', 'postgres:16', `reg:5000/lib/web@sha256:${'ab'.repeat(32)}`])
      expect(message(image)).toBe('accepted');
  });

  test('one that names no image a host can have, or is not text, is refused naming the path', () => {
    expect(message(':16')).toBe(
      'manifest_inline: services.db.image: names no image a host can have: its image name "-16" is not 1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit',
    );
    expect(message('reg.local/')).toMatch(/^manifest_inline: services\.db\.image: names no image/);
    expect(message('postgres\n:16')).toBe(
      'manifest_inline: services.db.image: must not contain control characters',
    );
    expect(message('pg\ud800')).toBe(
      'manifest_inline: services.db.image: must be well-formed Unicode (it has a lone surrogate)',
    );
    expect(message(`a${'b'.repeat(1024)}`)).toBe(
      'manifest_inline: services.db.image: must be at most 1024 characters',
    );
    expect(message('')).toBe('manifest_inline: services.db.image: must not be empty');
  });
});

describe('env names of a service (envNameProblem, the rule orch compile applies too)', () => {
  const message = (name: string) => {
    try {
      manifestServices(
        JSON.stringify({ version: '1', services: { db: { image: 'pg', env: { [name]: 'x' } } } }),
      );
    } catch (e) {
      return e instanceof OrchError ? e.message : 'other';
    }
    return 'accepted';
  };

  test('a variable name is accepted, up to 256 characters', () => {
    for (const name of ['PGUSER', '_x', 'a1_B', `A${'b'.repeat(255)}`])
      expect(message(name)).toBe('accepted');
  });

  test('anything the container environment cannot carry as a variable is refused naming it', () => {
    for (const name of ['my-var', '1A', 'A B', 'A=B', 'a\u0000b', '', 'é', `A${'b'.repeat(256)}`]) {
      const path = `services.db.env.${name}`;
      expect(message(name)).toBe(
        `manifest_inline: ${path.length > 200 ? `${path.slice(0, 200)}...` : path}: must be a variable name: letters, digits and "_", starting with a letter or "_", at most 256`,
      );
    }
  });
});
