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
});
