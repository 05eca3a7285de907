import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { HOST_BUSYBOX, HOST_CRUN } from '../src/images/guest-runtime.js';
import { ImageStore } from '../src/images/image-store.js';
import { Layout } from '../src/images/layout.js';
import { ensureBusyboxImage } from '../src/images/setup.js';

/** What a build runs on the host: busybox-static, crun (the guest runtime), e2fsprogs. */
function buildToolsAvailable(): boolean {
  const found =
    existsSync(HOST_BUSYBOX) &&
    existsSync(HOST_CRUN) &&
    spawnSync('sh', ['-c', 'command -v mkfs.ext4 && command -v debugfs']).status === 0;
  if (!found && process.env.CI === 'true')
    throw new Error('busybox-static, crun and e2fsprogs are required for image-store.test.ts under CI');
  return found;
}

const dir = mkdtempSync(join(tmpdir(), 'orch-image-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!buildToolsAvailable())('image builds', () => {
  test('two builds of one image at once both finish, and the image is one of them whole', async () => {
    // Two `orch-agent setup`s on one data dir, or an import beside a pull of the same name.
    const layout = new Layout(join(dir, 'data'));
    const store = new ImageStore(layout);
    const build = (which: string) =>
      store.build('twin', which, (root) => writeFile(join(root, 'which'), which), { source: which });
    await Promise.all([build('first'), build('second')]);
    const meta = await store.meta('twin');
    const file = layout.imageFile('twin');
    // image.json describes the rootfs.img beside it: its digest, and the build that wrote both.
    expect(meta?.digest).toBe(
      `sha256:${execFileSync('sha256sum', [file], { encoding: 'utf8' }).split(' ')[0]}`,
    );
    expect(['first', 'second']).toContain(meta?.description);
    expect(meta?.source).toBe(meta?.description);
    const which = execFileSync('debugfs', ['-R', 'cat /which', file], { encoding: 'utf8', stdio: 'pipe' });
    expect(which).toBe(meta?.description);
    expect(readdirSync(layout.imagesDir)).toEqual(['twin']);
  });

  test('setup rebuilds the busybox image when its recipe changed, and only then', async () => {
    const layout = new Layout(join(dir, 'setup'));
    const steps: string[] = [];
    const ensure = () => ensureBusyboxImage(layout, (m) => steps.push(m));
    await ensure();
    await ensure();
    expect(steps).toEqual([
      'image busybox: building (busybox root + guest agent)',
      'image busybox: ready',
      'image busybox: cached',
    ]);
    // An image built by an older recipe (or before recipes were recorded) is built again.
    const json = join(layout.imageDir('busybox'), 'image.json');
    const meta = JSON.parse(await readFile(json, 'utf8'));
    await writeFile(json, JSON.stringify({ ...meta, recipe_stamp: 'busybox-root-r0' }));
    steps.length = 0;
    await ensure();
    expect(steps).toEqual(['image busybox: building (busybox root + guest agent)', 'image busybox: ready']);
    expect(JSON.parse(await readFile(json, 'utf8'))).toMatchObject({ recipe_stamp: meta.recipe_stamp });
  });
});
