import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { AGENT_ID, IMAGE_NAME } from '@orch/protocol';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AGENT_BIN, AgentProcess } from './agent-process.js';

/**
 * Issue 13 item 2: ids in URLs and bodies must never reach a path outside AGENT_DATA_DIR. The agent
 * runs without QEMU (no VM can boot); sentinel directories that look like a snapshot, a VM and an
 * image sit next to the data dir at several depths, and every request must be a 4xx that leaves
 * them exactly as they were.
 */

const base = mkdtempSync(join(tmpdir(), 'orch-agent-traversal-'));
const dataDir = join(base, 'outer', 'agent');
const SENTINEL = `SENTINEL-${process.pid}-${Date.now()}`;
/** victim dirs: next to the data dir's subdirectories, next to the data dir, and above it. */
const victims = [join(dataDir, 'victim'), join(base, 'outer', 'victim'), join(base, 'victim')];

function plantVictim(dir: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'disk.qcow2'), SENTINEL);
  writeFileSync(
    join(dir, 'snapshot.json'),
    JSON.stringify({ snapshot_id: 'victim', vm_id: 'v', kind: 'disk', spec: {}, append: '', kernel: '' }),
  );
  writeFileSync(join(dir, 'image.json'), JSON.stringify({ name: 'victim' }));
  writeFileSync(join(dir, 'rootfs.img'), SENTINEL);
  writeFileSync(join(dir, 'vm.json'), JSON.stringify({ id: 'victim', state: 'running' }));
  writeFileSync(join(dir, 'startup.log'), SENTINEL);
}

/** Every file and directory under `dir` with its size, mtime and content hash. */
function fingerprint(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      const s = statSync(p);
      if (e.isDirectory()) {
        out.push(`${relative(base, p)}/ ${s.mtimeMs}`);
        walk(p);
      } else {
        const h = createHash('sha256').update(readFileSync(p)).digest('hex');
        out.push(`${relative(base, p)} ${s.size} ${s.mtimeMs} ${h}`);
      }
    }
  };
  walk(dir);
  return out.sort();
}

/** Sends `path` exactly as written (no URL normalisation by the client). */
function raw(
  agent: AgentProcess,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: agent.port,
        method,
        path,
        headers: {
          authorization: `Bearer ${agent.token}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end(body !== undefined ? JSON.stringify(body) : undefined);
  });
}

/** Percent-encodes what an HTTP request line cannot carry raw (non-ASCII, control characters, space). */
const wire = (s: string) =>
  [...s].map((c) => (/^[\x21-\x7e]$/.test(c) ? c : encodeURIComponent(c).replace(/%00/g, '%00'))).join('');

const DOTS = [
  '..',
  '.',
  '%2e%2e',
  '%2E%2E',
  '.%2e',
  '%2e.',
  '%252e%252e',
  '%c0%ae%c0%ae',
  '\u2025',
  '\uff0e\uff0e',
  '\u2024\u2024',
];
const SEPS = ['%2f', '%2F', '%252f', '%5c', '%5C', '\\', '%255c', '\u2215', '\uff0f', '%c0%af', '/'];
const TARGETS = ['victim', 'victim%00', 'victim%2500', `${'a'.repeat(70)}`, '', 'victim%2f'];

/** Mostly `value`, sometimes one of `others`. */
const mostly = (value: string, others: readonly string[]) =>
  fc.oneof({ arbitrary: fc.constant(value), weight: others.length }, fc.constantFrom(...others));

/**
 * A traversal id as it appears in a URL path segment: one spelling of `..` and of the separator,
 * repeated 1-4 times (the victims sit 1, 2 and 3 levels up), a target and a tail; sometimes the
 * steps mix spellings.
 */
const traversal = fc
  .tuple(
    fc.oneof(
      fc
        .tuple(fc.constantFrom(...DOTS), fc.constantFrom(...SEPS), fc.integer({ min: 1, max: 4 }))
        .map(([d, sep, n]) => (d + sep).repeat(n)),
      fc
        .array(fc.tuple(fc.constantFrom(...DOTS), fc.constantFrom(...SEPS)), { minLength: 1, maxLength: 4 })
        .map((steps) => steps.map(([d, sep]) => d + sep).join('')),
    ),
    mostly('victim', TARGETS),
    mostly('', ['%00', '%2500', '\0']),
  )
  .map(([steps, target, tail]) => wire(`${steps}${target}${tail}`));

/** Fixed attacks besides the generated ones: absolute paths, over-long ids, lone dots, NUL. */
const FIXED = [
  '..%2F..%2Fvictim',
  '..%2F..%2F..%2Fvictim',
  '%2e%2e%2f%2e%2e%2fvictim',
  '..%252F..%252Fvictim',
  '..%5C..%5Cvictim',
  encodeURIComponent(join(base, 'victim')),
  encodeURIComponent(victims[0]!),
  '%2e%2e',
  '%2e',
  'victim%00',
  '%00',
  'a'.repeat(64),
  'a'.repeat(5000),
  '%ef%bc%8e%ef%bc%8e%ef%bc%8fvictim',
  '%',
  '%zz',
];

let agent: AgentProcess;
let before: string[];

beforeAll(async () => {
  for (const v of victims) plantVictim(v);
  mkdirSync(dataDir, { recursive: true });
  agent = await AgentProcess.start({ dataDir, env: { AGENT_QEMU: '/nonexistent/qemu-system-x86_64' } });
  before = fingerprint(base);
});

afterAll(async () => {
  await agent?.stop();
  rmSync(base, { recursive: true, force: true });
});

/**
 * The answer is the documented envelope with a 4xx, never the sentinel's bytes. A raw backslash in
 * the request path is refused by @hono/node-server before the app sees it (a 400 without a body).
 */
function expectRefused(r: { status: number; text: string }, what: string): void {
  expect(r.status, what).toBeGreaterThanOrEqual(400);
  expect(r.status, what).toBeLessThan(500);
  expect(r.text, what).not.toContain(SENTINEL);
  if (r.text === '' && what.split(' ')[1]?.includes('\\')) {
    expect(r.status, what).toBe(400);
    return;
  }
  const body = JSON.parse(r.text) as { error: { code: string } };
  expect(['invalid_argument', 'not_found', 'route_not_found'], what).toContain(body.error.code);
}

describe('no id reaches a path outside the data dir', () => {
  const routes: [string, (id: string) => string, unknown?][] = [
    ['GET', (id) => `/v1/snapshots/${id}/data`],
    ['DELETE', (id) => `/v1/snapshots/${id}`],
    ['GET', (id) => `/v1/vms/${id}`],
    ['DELETE', (id) => `/v1/vms/${id}`],
    ['GET', (id) => `/v1/vms/${id}/log`],
    ['POST', (id) => `/v1/vms/${id}/exec`, { argv: ['true'] }],
    ['POST', (id) => `/v1/vms/${id}/snapshots`, { snapshot_id: 'ok' }],
    ['POST', (id) => `/v1/vms/${id}/pause`],
    ['POST', (id) => `/v1/vms/${id}/resume`],
    ['GET', (id) => `/v1/vms/${id}/console`],
  ];

  test.each(FIXED)('fixed attack %s on every route is a 4xx', async (id) => {
    for (const [method, path, body] of routes)
      expectRefused(await raw(agent, method, path(id), body), `${method} ${path(id)}`);
  });

  test('generated encodings on every route are 4xx', async () => {
    await fc.assert(
      fc.asyncProperty(traversal, async (id) => {
        for (const [method, path, body] of routes)
          expectRefused(await raw(agent, method, path(id), body), `${method} ${path(id)}`);
      }),
      { numRuns: 300 },
    );
  });

  test('the ids of a create body are checked: VM id, image name, snapshot ids', async () => {
    const decoded = fc
      .oneof(
        traversal.map((t) => {
          try {
            return decodeURIComponent(t);
          } catch {
            return t;
          }
        }),
        fc.constantFrom(...FIXED.filter((f) => !f.startsWith('%') || f.length > 3).map(decodeURIComponent)),
      )
      .filter((id) => !AGENT_ID.test(id) && !IMAGE_NAME.test(id));
    const spec = { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 60 };
    const create = (over: Record<string, unknown>, specOver: Record<string, unknown> = {}) => ({
      id: 'vm-ok',
      spec: { ...spec, ...specOver },
      manifest_inline: '',
      startup_script: '',
      ...over,
    });
    await fc.assert(
      fc.asyncProperty(decoded, async (bad) => {
        for (const body of [
          create({ id: bad }),
          create({}, { image: bad }),
          create({ restore_snapshot_id: bad }),
          create({ seed_snapshot_id: bad }),
        ]) {
          const r = await raw(agent, 'POST', '/v1/vms', body);
          expectRefused(r, JSON.stringify(body));
          expect(r.status).toBe(400);
        }
        const snap = await raw(agent, 'POST', '/v1/vms/vm-ok/snapshots', { snapshot_id: bad });
        expectRefused(snap, `snapshot_id ${JSON.stringify(bad)}`);
      }),
      { numRuns: 100 },
    );
  });

  test('image import refuses bad names', () => {
    for (const name of [
      '../victim',
      '../../victim',
      '..',
      '.hidden',
      join(base, 'victim'),
      'a/b',
      'a\\b',
      'x'.repeat(64),
    ]) {
      const r = spawnSync(
        process.execPath,
        [AGENT_BIN, 'image', 'import', name, join(victims[2]!, 'rootfs.img')],
        {
          env: { PATH: process.env.PATH ?? '', AGENT_DATA_DIR: dataDir },
          encoding: 'utf8',
          timeout: 30_000,
        },
      );
      expect(r.status, name).not.toBe(0);
      expect(r.stderr, name).toContain('is not a valid image name');
    }
  });

  test('afterwards every sentinel is exactly as it was, and the data dir holds only what the agent made', () => {
    expect(fingerprint(base)).toEqual(before);
    // exports/: the default export root, created (0700) at start.
    expect(readdirSync(dataDir).sort()).toEqual(['exports', 'snapshots', 'victim', 'vms']);
  });
});
