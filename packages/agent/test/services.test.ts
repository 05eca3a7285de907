import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import type { AgentError } from '../src/errors.js';
import { ORCH_SERVICE_LOG, SERVICE_LOG_ROTATE_BYTES } from '../src/images/guest-services.js';
import { ImageStore } from '../src/images/image-store.js';
import { Layout } from '../src/images/layout.js';
import {
  parseServiceStatus,
  prepareServices,
  serviceLogScript,
  servicesStartupField,
} from '../src/vm/services.js';

const dir = mkdtempSync(join(tmpdir(), 'orch-services-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const layout = new Layout(join(dir, 'data'));
function image(name: string, config: object | undefined) {
  mkdirSync(layout.imageDir(name), { recursive: true });
  writeFileSync(
    join(layout.imageDir(name), 'image.json'),
    JSON.stringify({ name, description: '', created_at: '', size_bytes: 0, runtime_stamp: '', config }),
  );
}
image('web-1', {
  Env: ['PATH=/bin', 'GREETING=image', 'NAME=image'],
  Entrypoint: ['/bin/start'],
  Cmd: ['--port', '80'],
  WorkingDir: '/www',
  User: '100:101',
});
image('nocmd', { Env: [] });
const manifest = (services: object) => JSON.stringify({ version: '1', services });

describe('service configs (host side)', () => {
  test('env is the image Env, then literals, then secrets; Entrypoint+Cmd, WorkingDir, User; own namespaces but the network', async () => {
    const [svc, ...rest] = await prepareServices(
      layout,
      new ImageStore(layout),
      manifest({
        web: { image: 'reg.local/web:1', ports: [80], env: { GREETING: 'literal', NAME: { secret: 'n' } } },
      }),
      { n: 'from-secret' },
    );
    expect(rest).toEqual([]);
    expect(svc!.service).toMatchObject({ name: 'web', imageName: 'web-1' });
    expect(svc!.imageFile).toBe(layout.imageFile('web-1'));
    const config = svc!.config as {
      process: { args: string[]; env: string[]; cwd: string; user: object; terminal: boolean };
      root: { path: string };
      linux: { namespaces: { type: string }[] };
    };
    expect(config.process).toMatchObject({
      args: ['/bin/start', '--port', '80'],
      env: ['PATH=/bin', 'GREETING=literal', 'NAME=from-secret'],
      cwd: '/www',
      user: { uid: 100, gid: 101 },
      terminal: false,
    });
    expect(config.root.path).toBe('/run/orch/svc/web/rootfs');
    expect(config.linux.namespaces.map((n) => n.type).sort()).toEqual(['ipc', 'mount', 'pid']);
    // The startup field carries the config (secrets included) base64 on one line per service.
    const [name, serial, b64] = servicesStartupField([svc!]).trim().split(' ');
    expect([name, serial]).toEqual(['web', 'svc0']);
    expect(JSON.parse(Buffer.from(b64!, 'base64').toString())).toEqual(svc!.config);
  });

  test('refusals name the service and the image', async () => {
    const store = new ImageStore(layout);
    const refusal = (m: object, secrets = {}) =>
      prepareServices(layout, store, manifest(m), secrets).then(
        () => undefined,
        (e: AgentError) => ({ code: e.code, message: e.message, details: e.details }),
      );
    expect(await refusal({ db: { image: 'postgres:16' } })).toEqual({
      code: 'invalid_argument',
      message: 'service db: image "postgres:16" (postgres-16) is not on this host',
      details: { service: 'db', image: 'postgres:16', available: ['nocmd', 'web-1'] },
    });
    expect((await refusal({ x: { image: 'nocmd' } }))?.message).toBe(
      'service x: image nocmd has no Entrypoint or Cmd to run',
    );
    expect((await refusal({ 'Bad/Name': { image: 'web-1' } }))?.code).toBe('invalid_argument');
    expect((await refusal({ w: { image: 'web-1', env: { K: { secret: 'missing' } } } }))?.message).toContain(
      'needs secret missing',
    );
  });

  test('status lines update the reported services', () => {
    const before = [
      { name: 'web', image: 'w', state: 'starting' as const, restarts: 0, ports: [80] },
      { name: 'db', image: 'd', state: 'starting' as const, restarts: 0, ports: [] },
    ];
    expect(parseServiceStatus(before, 'web restarting 2 137\ndb running 0 -\n')).toEqual([
      { name: 'web', image: 'w', state: 'restarting', restarts: 2, exit_code: 137, ports: [80] },
      { name: 'db', image: 'd', state: 'running', restarts: 0, ports: [] },
    ]);
  });
});

describe('service logs (the guest scripts, run here with the host busybox)', () => {
  const logDir = join(dir, 'log');
  const guest = (script: string) => script.replaceAll('/orch/bin/busybox', '/bin/busybox');
  const read = (window: { offset?: number; tail?: number }) => {
    const out = execFileSync('/bin/busybox', [
      'sh',
      '-c',
      guest(serviceLogScript('web', window, 1 << 20)).replace('/run/orch/svc/web/log', logDir),
    ]);
    const nl = out.indexOf(10);
    const [start, size] = out.subarray(0, nl).toString().split(' ').map(Number);
    return { start, size, bytes: out.subarray(nl + 1).toString() };
  };

  test('rotated at the limit, at most twice it kept, offsets absolute across rotations', () => {
    const line = `${'x'.repeat(99)}\n`;
    const lines = Math.ceil((SERVICE_LOG_ROTATE_BYTES * 2.5) / line.length);
    const input = Array.from(
      { length: lines },
      (_, i) => `${String(i).padStart(6, '0')}${line.slice(6)}`,
    ).join('');
    execFileSync('/bin/busybox', ['sh', '-c', `${guest(ORCH_SERVICE_LOG)}`, 'service-log', logDir], {
      input,
    });
    const all = read({ offset: 0 });
    expect(all.size).toBe(input.length);
    // What rotation dropped is gone: the window starts at the oldest byte kept, on a line start.
    expect(all.start).toBeGreaterThan(0);
    expect(all.bytes).toBe(input.slice(all.start));
    expect(all.bytes.length).toBeLessThanOrEqual(2 * SERVICE_LOG_ROTATE_BYTES);
    expect(read({ tail: 100 })).toEqual({
      start: input.length - 100,
      size: input.length,
      bytes: input.slice(-100),
    });
    expect(read({ offset: input.length - 50 }).bytes).toBe(input.slice(-50));
    expect(read({ offset: input.length + 10 })).toEqual({
      start: input.length,
      size: input.length,
      bytes: '',
    });
  });
});
