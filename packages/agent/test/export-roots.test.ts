import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorFromBody } from '@orch/protocol';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildApp } from '../src/api/app.js';
import { BearerAuth } from '../src/api/auth.js';
import { loadConfig } from '../src/config.js';
import { AgentError } from '../src/errors.js';
import { Layout } from '../src/images/layout.js';
import { ArtifactTransfer } from '../src/transfer/artifact-transfer.js';
import { ExportRoots, OUTSIDE_EXPORT_ROOTS } from '../src/transfer/export-roots.js';
import type { SnapshotMeta, Snapshots } from '../src/vm/snapshots.js';
import type { VmManager } from '../src/vm/vm-manager.js';

/**
 * `file://` exports and fetches stay under the operator's export roots, checked on real paths:
 * a destination outside them, a symlink inside a root that points out, or a root others can write
 * is refused with `400 invalid_argument` (`details.reason: outside_export_roots`) and nothing is
 * created; a destination under a root (also through a symlink that stays inside) is written.
 */
describe('export roots', () => {
  let base: string;
  let root: string;
  let outside: string;
  let transfer: ArtifactTransfer;
  const DISK = Buffer.from('not really a qcow2 image');
  const meta = {
    snapshot_id: 'snap_1',
    kind: 'disk',
    digest: createHash('sha256').update(DISK).digest('hex'),
  } as unknown as SnapshotMeta;

  const make = (roots: string[]) => {
    const layout = new Layout(join(base, 'agent'));
    // The snapshot catalogue: only what an export reads (the artifact's files are real files).
    const snapshots = { meta: async () => meta, exists: () => false } as unknown as Snapshots;
    return new ArtifactTransfer({
      layout,
      snapshots,
      s3: {
        endpoint: '',
        region: 'us-east-1',
        accessKeyId: '',
        secretAccessKey: '',
        forcePathStyle: true,
        partSizeBytes: 5 << 20,
      },
      roots: new ExportRoots(roots),
      logger: pino({ level: 'silent' }),
    });
  };
  const refusal = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AgentError);
    const e = err as AgentError;
    expect([e.status, e.code, e.details?.reason]).toEqual([400, 'invalid_argument', OUTSIDE_EXPORT_ROOTS]);
    return e.message;
  };

  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), 'export-roots-'));
    root = join(base, 'exports');
    outside = join(base, 'outside');
    await mkdir(root, { mode: 0o700 });
    await mkdir(outside, { mode: 0o700 });
    const dir = new Layout(join(base, 'agent')).snapshotDir('snap_1');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'disk.qcow2'), DISK);
    await writeFile(join(dir, 'snapshot.json'), JSON.stringify(meta));
    transfer = make([root]);
  });
  afterAll(async () => {
    await rm(base, { recursive: true, force: true });
  });

  test('a destination under a root is exported there and verified', async () => {
    const r = await transfer.exportTo('snap_1', `file://${root}/team/`);
    expect(r.export_ref).toBe(`file://${root}/team/snap_1`);
    expect(await readFile(join(root, 'team', 'snap_1', 'disk.qcow2'))).toEqual(DISK);
    expect(await transfer.checkDestination(`file://${root}/team/`)).toEqual({
      destination: `file://${root}/team`,
    });
  });

  test('outside every root: refused, nothing created (export, check and fetch alike)', async () => {
    const target = join(outside, 'probe');
    expect(await refusal(transfer.exportTo('snap_1', `file://${target}`))).toContain(
      'is not under an export root',
    );
    await refusal(transfer.checkDestination(`file://${target}`));
    await refusal(
      transfer.fetch('snap_2', { digest: meta.digest, source: { export_ref: `file://${target}/snap_1` } }),
    );
    expect(existsSync(target)).toBe(false);
    // `/etc` the way the issue reproduced it: a prefix of no root.
    await refusal(transfer.exportTo('snap_1', 'file:///etc/orch-probe'));
    expect(existsSync('/etc/orch-probe')).toBe(false);
    // A sibling whose name merely starts with the root's is not under it.
    await refusal(transfer.exportTo('snap_1', `file://${root}-evil`));
    expect(existsSync(`${root}-evil`)).toBe(false);
  });

  test('a symlink inside a root that points out does not escape; one that stays inside is followed', async () => {
    await symlink(outside, join(root, 'escape'));
    expect(await refusal(transfer.exportTo('snap_1', `file://${root}/escape/deeper`))).toContain(
      'once symlinks are resolved',
    );
    expect(await readdir(outside)).toEqual([]);
    // The last component itself a symlink out: the same.
    await symlink(outside, join(root, 'team', 'snap_9'));
    await refusal(transfer.exportTo('snap_1', `file://${root}/team/snap_9`));
    expect(await readdir(outside)).toEqual([]);
    await mkdir(join(root, 'real'), { mode: 0o700 });
    await symlink(join(root, 'real'), join(root, 'inside'));
    const r = await transfer.exportTo('snap_1', `file://${root}/inside`);
    expect(r.export_ref).toBe(`file://${root}/inside/snap_1`);
    expect(existsSync(join(root, 'real', 'snap_1', 'manifest.json'))).toBe(true);
  });

  test('no roots: every file:// destination is refused; a root writable by others is refused', async () => {
    expect(await refusal(make([]).exportTo('snap_1', `file://${root}/x`))).toContain('has no export roots');
    expect(existsSync(join(root, 'x'))).toBe(false);
    const shared = join(base, 'shared');
    await mkdir(shared);
    await chmod(shared, 0o777);
    expect(await refusal(make([shared]).exportTo('snap_1', `file://${shared}/x`))).toContain(
      'writable by group or others',
    );
    expect(await readdir(shared)).toEqual([]);
  });

  test('the check route answers the normal form or the refusal on the wire', async () => {
    const app = buildApp({
      auth: new BearerAuth('t'),
      vms: {} as VmManager,
      transfer,
      info: async () => {
        throw new Error('unused');
      },
      logger: pino({ level: 'silent' }),
    });
    const check = (destination: string) =>
      app.request('/v1/destinations/check', {
        method: 'POST',
        headers: { authorization: 'Bearer t', 'content-type': 'application/json' },
        body: JSON.stringify({ destination }),
      });
    const ok = await check(`file://${root}//a/`);
    expect([ok.status, await ok.json()]).toEqual([200, { destination: `file://${root}/a` }]);
    const no = await check('file:///root/x');
    const e = errorFromBody(no.status, await no.json());
    expect([e.status, e.code, e.details?.reason]).toEqual([400, 'invalid_argument', OUTSIDE_EXPORT_ROOTS]);
    expect(existsSync(join(root, 'a'))).toBe(false);
  });

  test('configuration: default <data dir>/exports, a list, or none', () => {
    const env = { MICROVM_AGENT_TOKEN: 't', AGENT_DATA_DIR: '/var/lib/orch-agent' };
    expect(loadConfig({}, env).exportRoots).toEqual(['/var/lib/orch-agent/exports']);
    expect(loadConfig({}, { ...env, AGENT_EXPORT_ROOTS: '/srv/a, /srv/b/' }).exportRoots).toEqual([
      '/srv/a',
      '/srv/b',
    ]);
    expect(loadConfig({}, { ...env, AGENT_EXPORT_ROOTS: 'none' }).exportRoots).toEqual([]);
    expect(() => loadConfig({}, { ...env, AGENT_EXPORT_ROOTS: 'relative' })).toThrow(/absolute path/);
  });
});
