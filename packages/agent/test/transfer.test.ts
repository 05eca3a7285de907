import { createHash, createHmac, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TRANSFER_GRANT_HEADER, transferGrantMessage } from '@orch/protocol';
import { freePort } from '@support/pg/testing';
// @ts-expect-error s3rver ships no types
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentProcess } from './agent-process.js';

/**
 * Snapshot artifacts travel (no QEMU needed: the artifacts are fabricated files): exports to a
 * directory and to an S3-compatible server (`s3rver`, started here, with multipart parts of 5 MiB),
 * fetches from another agent and from both exports, each verified by sha256 against the digests
 * the caller gives; a corrupted export is refused and nothing is installed; bad destinations and
 * sources are refused before anything is dialled or written; S3 credentials never reach an answer
 * or a log line.
 */
const S3_SECRET = `secret-${randomBytes(8).toString('hex')}`;
const root = mkdtempSync(join(tmpdir(), 'orch-transfer-'));
const exportsDir = join(root, 'exports');
let s3: { close: () => Promise<void> };
let s3Url = '';
let a: AgentProcess;
let b: AgentProcess;
const sha = (buf: Buffer) => createHash('sha256').update(buf).digest('hex');
/** A transfer grant for `snapshotId` on the agent with `token` (as orchd makes it), expiring in `ttl` s. */
const grant = (token: string, snapshotId: string, ttl = 600) => {
  const expires = Math.floor(Date.now() / 1000) + ttl;
  return `${expires}.${createHmac('sha256', token).update(transferGrantMessage(snapshotId, expires)).digest('hex')}`;
};
const disk = randomBytes(3 * 2 ** 20 + 123);
const state = randomBytes(11 * 2 ** 20 + 7); // three parts of 5 MiB: a multipart upload
const meta = {
  snapshot_id: 'snap_a',
  vm_id: 'env_a',
  kind: 'live',
  size_bytes: disk.length + state.length,
  digest: sha(disk),
  state_digest: sha(state),
  arch: 'amd64',
  created_at: new Date().toISOString(),
  spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 60 },
  append: 'console=ttyS0',
  kernel: '/nonexistent/kernel/vmlinux-6.1.0-test',
  accelerator: 'tcg',
};

function agentEnv(withS3: boolean): Record<string, string> {
  return {
    AGENT_QEMU: '/nonexistent/qemu-system-x86_64',
    AGENT_S3_PART_SIZE_MB: '5',
    AGENT_EXPORT_ROOTS: exportsDir,
    ...(withS3
      ? { AGENT_S3_ENDPOINT: s3Url, AGENT_S3_ACCESS_KEY_ID: 'S3RVER', AGENT_S3_SECRET_ACCESS_KEY: 'S3RVER' }
      : {}),
  };
}

beforeAll(async () => {
  const port = await freePort();
  const server = new S3rver({
    port,
    address: '127.0.0.1',
    silent: true,
    directory: join(root, 's3'),
    configureBuckets: [{ name: 'orch-exports' }],
  });
  await server.run();
  s3 = server;
  s3Url = `http://127.0.0.1:${port}`;
  const dirA = join(root, 'a');
  const snap = join(dirA, 'snapshots', 'snap_a');
  mkdirSync(snap, { recursive: true });
  writeFileSync(join(snap, 'disk.qcow2'), disk);
  writeFileSync(join(snap, 'state.bin'), state);
  writeFileSync(join(snap, 'startup.log'), 'counter 1\n');
  writeFileSync(join(snap, 'snapshot.json'), JSON.stringify(meta));
  a = await AgentProcess.start({ dataDir: dirA, env: agentEnv(true) });
  b = await AgentProcess.start({ dataDir: join(root, 'b'), env: agentEnv(true) });
}, 60_000);

afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await s3?.close();
  rmSync(root, { recursive: true, force: true });
});

const fileOf = (agent: AgentProcess, id: string, name: string) =>
  readFileSync(join(agent.dataDir, 'snapshots', id, name));

describe('exports', () => {
  test('to a directory: files, read back and verified, manifest last; export_ref is <destination>/<id>', async () => {
    const r = await a.request<{ export_ref: string; files: { name: string; sha256: string }[] }>(
      'POST',
      '/v1/snapshots/snap_a/export',
      { destination: `file://${exportsDir}/nightly` },
    );
    expect(r.status).toBe(200);
    expect(r.body.export_ref).toBe(`file://${exportsDir}/nightly/snap_a`);
    const dir = join(exportsDir, 'nightly', 'snap_a');
    expect(readFileSync(join(dir, 'disk.qcow2')).equals(disk)).toBe(true);
    expect(readFileSync(join(dir, 'state.bin')).equals(state)).toBe(true);
    const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
    expect(manifest).toMatchObject({
      format: 'orch-snapshot/1',
      digest: sha(disk),
      state_digest: sha(state),
    });
    expect(readdirSync(dir).filter((f) => f.endsWith('.partial'))).toEqual([]);
  });

  test('to s3:// (multipart) and back: a fetch from the export verifies both digests', async () => {
    const r = await a.request<{ export_ref: string }>('POST', '/v1/snapshots/snap_a/export', {
      destination: 's3://orch-exports/team/x',
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.export_ref).toBe('s3://orch-exports/team/x/snap_a');
    const f = await b.request('POST', '/v1/snapshots/snap_s3/fetch', {
      digest: sha(disk),
      state_digest: sha(state),
      source: { export_ref: r.body.export_ref },
    });
    expect(f.status, JSON.stringify(f.body)).toBe(200);
    expect(f.body).toMatchObject({ snapshot_id: 'snap_s3', kind: 'live', digest: sha(disk) });
    expect(fileOf(b, 'snap_s3', 'state.bin').equals(state)).toBe(true);
    expect(fileOf(b, 'snap_s3', 'disk.qcow2').equals(disk)).toBe(true);
  });

  test('refused before anything is written: bad destinations 400, unknown snapshot 404, s3 without credentials 400', async () => {
    for (const destination of [
      'http://example.test/x',
      'file://host/dir',
      'file:///tmp/../etc',
      'file:///tmp/%2e%2e/etc',
      'file:///tmp/x?y=1',
      'file:///tmp/x#frag',
      's3://UPPER/x',
      's3://user:pw@orch-exports/x',
      's3://@orch-exports/x',
      's3:///x',
      's3://orch-exports/a/../b',
      'relative/dir',
    ]) {
      const r = await a.request<{ error: { code: string; message: string } }>(
        'POST',
        '/v1/snapshots/snap_a/export',
        { destination },
      );
      expect(r.status, destination).toBe(400);
      expect(r.body.error.code).toBe('invalid_argument');
      expect(r.body.error.message).toMatch(/^destination: /);
    }
    const unknown = await a.request<{ error: { code: string } }>('POST', '/v1/snapshots/snap_nope/export', {
      destination: `file://${exportsDir}/x`,
    });
    expect(unknown.status).toBe(404);
    expect(existsSync(join(exportsDir, 'x'))).toBe(false);
    const noCreds = await AgentProcess.start({ dataDir: join(root, 'a'), env: agentEnv(false) }).catch(
      (e: Error) => e,
    );
    // Same data dir as agent a would fight over nothing (no VMs); it only answers this one call.
    if (noCreds instanceof Error) throw noCreds;
    try {
      const r = await noCreds.request<{ error: { code: string; message: string } }>(
        'POST',
        '/v1/snapshots/snap_a/export',
        { destination: 's3://orch-exports/y' },
      );
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(/AGENT_S3_ACCESS_KEY_ID/);
    } finally {
      await noCreds.stop();
    }
  });
});

describe('fetch', () => {
  test('from another agent over the agent protocol, verified; a second fetch is a no-op', async () => {
    const body = {
      digest: sha(disk),
      state_digest: sha(state),
      source: { agent_url: a.url, grant: grant(a.token, 'snap_a') },
    };
    const r = await b.request('POST', '/v1/snapshots/snap_a/fetch', body);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(fileOf(b, 'snap_a', 'disk.qcow2').equals(disk)).toBe(true);
    expect(fileOf(b, 'snap_a', 'startup.log').toString()).toBe('counter 1\n');
    expect((await b.request('POST', '/v1/snapshots/snap_a/fetch', body)).status).toBe(200);
    // B never had A's token: only a grant for this snapshot's files.
    expect(b.output.join('\n')).not.toContain(a.token);
  });

  test("a transfer grant opens one snapshot's files on the agent that signed it, until it expires, and nothing else", async () => {
    const get = (path: string, value: string) =>
      fetch(`${a.url}${path}`, { headers: { [TRANSFER_GRANT_HEADER]: value } });
    const ok = await get('/v1/snapshots/snap_a/files/disk.qcow2', grant(a.token, 'snap_a'));
    expect(ok.status).toBe(200);
    expect(Buffer.from(await ok.arrayBuffer()).equals(disk)).toBe(true);
    for (const [path, value] of [
      ['/v1/snapshots/snap_b/files/disk.qcow2', grant(a.token, 'snap_a')], // another snapshot
      ['/v1/snapshots/snap_a/files/disk.qcow2', grant(b.token, 'snap_a')], // signed under another token
      ['/v1/snapshots/snap_a/files/disk.qcow2', grant(a.token, 'snap_a', -5)], // expired
      ['/v1/snapshots/snap_a/files/disk.qcow2', grant(a.token, 'snap_a', 3 * 86_400)], // too far ahead
      ['/v1/snapshots/snap_a/files/disk.qcow2', 'garbage'],
      ['/v1/vms', grant(a.token, 'snap_a')], // any other route
      ['/v1/info', grant(a.token, 'snap_a')],
    ] as const) {
      const r = await get(path, value);
      expect(r.status, `${path} ${value}`).toBe(401);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
    }
    // A malformed id is refused as a path, never a crash.
    const malformed = await get('/v1/snapshots/%ZZ/files/disk.qcow2', grant(a.token, '%ZZ'));
    expect(malformed.status).toBe(404);
    const del = await fetch(`${a.url}/v1/snapshots/snap_a`, {
      method: 'DELETE',
      headers: { [TRANSFER_GRANT_HEADER]: grant(a.token, 'snap_a') },
    });
    expect(del.status).toBe(401);
  });

  test('a corrupted export is refused by its digest and nothing is installed', async () => {
    const dir = join(exportsDir, 'nightly', 'snap_a');
    const bytes = readFileSync(join(dir, 'disk.qcow2'));
    bytes[1000] = (bytes[1000] ?? 0) ^ 0xff;
    writeFileSync(join(dir, 'disk.qcow2'), bytes);
    const r = await b.request<{ error: { code: string; message: string; details: { reason: string } } }>(
      'POST',
      '/v1/snapshots/snap_bad/fetch',
      { digest: sha(disk), state_digest: sha(state), source: { export_ref: `file://${dir}` } },
    );
    expect(r.status).toBe(409);
    expect(r.body.error).toMatchObject({ code: 'conflict', details: { reason: 'digest_mismatch' } });
    expect(r.body.error.message).toMatch(/disk\.qcow2 .* does not match its digest/);
    expect(existsSync(join(b.dataDir, 'snapshots', 'snap_bad'))).toBe(false);
    expect(readdirSync(join(b.dataDir, 'snapshots')).filter((n) => n.startsWith('.fetch'))).toEqual([]);
    // The wrong memory checksum is refused too.
    const wrongState = await b.request<{ error: { details: { reason: string } } }>(
      'POST',
      '/v1/snapshots/snap_bad2/fetch',
      {
        digest: sha(disk),
        state_digest: sha(disk),
        source: { agent_url: a.url, grant: grant(a.token, 'snap_a'), snapshot_id: 'snap_a' },
      },
    );
    expect(wrongState.status).toBe(409);
    expect(wrongState.body.error.details.reason).toBe('digest_mismatch');
  });

  test('sources are checked before any dial; a missing export is 404', async () => {
    const digest = sha(disk);
    for (const source of [
      { agent_url: 'http://u:p@127.0.0.1:1', grant: grant('t', 'snap_x') },
      { agent_url: 'ftp://127.0.0.1:1', grant: grant('t', 'snap_x') },
      { agent_url: 'http://169.254.169.254', grant: grant('t', 'snap_x') }, // link-local: never dialled
      { agent_url: 'http://[::ffff:169.254.169.254]', grant: grant('t', 'snap_x') },
      { agent_url: 'http://127.0.0.1:1', agent_token: 't' }, // a token is never accepted as a source
      { agent_url: 'http://127.0.0.1:1', grant: 'not-a-grant' },
      { export_ref: 'file:///a/../b' },
    ]) {
      const r = await b.request<{ error: { code: string } }>('POST', '/v1/snapshots/snap_x/fetch', {
        digest,
        source,
      });
      expect(r.status, JSON.stringify(source)).toBe(400);
      expect(r.body.error.code).toBe('invalid_argument');
    }
    const missing = await b.request<{ error: { code: string } }>('POST', '/v1/snapshots/snap_x/fetch', {
      digest,
      source: { export_ref: `file://${exportsDir}/none/snap_a` },
    });
    expect(missing.status).toBe(404);
    const badId = await b.request('POST', '/v1/snapshots/..%2Fx/fetch', {
      digest,
      source: { export_ref: 'file:///x' },
    });
    expect(badId.status).toBe(404);
  });

  test('no S3 credential in any answer or log line', () => {
    expect([...a.output, ...b.output].join('\n')).not.toContain(S3_SECRET);
    expect([...a.output, ...b.output].join('\n')).not.toMatch(/S3RVER"/);
  });
});
