import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { AGENT_ID, IMAGE_NAME, DEFAULT_IMAGE as PROTOCOL_DEFAULT_IMAGE } from '@orch/protocol';
import fc from 'fast-check';
import { afterAll, describe, expect, test } from 'vitest';
import { AgentError } from '../src/errors.js';
import { ImageStore } from '../src/images/image-store.js';
import { DEFAULT_IMAGE, Layout } from '../src/images/layout.js';
import { importImage } from '../src/images/oci-import.js';

const base = mkdtempSync(join(tmpdir(), 'orch-agent-layout-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
const layout = new Layout(join(base, 'data'));

/** Ids an attacker would try: traversal in every spelling, separators, NUL, absolute paths, long ids. */
const ATTACKS = [
  '',
  '.',
  '..',
  '../victim',
  '../../victim',
  '..\\victim',
  '..%2Fvictim',
  '%2e%2e',
  '%2e%2e%2fvictim',
  '%252e%252e%252fvictim',
  'a/../../victim',
  'a\\..\\victim',
  'victim\0',
  'a\0/../victim',
  '/etc',
  join(base, 'victim'),
  '\u2025',
  '\uff0e\uff0e/victim',
  '\u2024\u2024\u2215victim',
  '..\u2215victim',
  '-rf',
  'a'.repeat(64),
  'a'.repeat(100_000),
  'snap\n',
  ' snap',
];

/** Arbitrary strings, weighted towards path syntax. */
const anyId = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc
    .array(
      fc.constantFrom('..', '.', '/', '\\', '\0', '%2f', '%2e', 'a', 'Z', '9', '-', '_', '\uff0e', '\u2215'),
      {
        maxLength: 12,
      },
    )
    .map((parts) => parts.join('')),
  fc.constantFrom(...ATTACKS),
);

function invalidArgument(fn: () => unknown): AgentError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AgentError);
    expect((err as AgentError).code).toBe('invalid_argument');
    expect((err as AgentError).status).toBe(400);
    return err as AgentError;
  }
  throw new Error('expected invalid_argument, nothing was thrown');
}

describe('Layout turns ids into paths only when they match their pattern', () => {
  test('valid ids map to a direct child of their directory', () => {
    expect(layout.vmDir('vm-1')).toBe(join(base, 'data', 'vms', 'vm-1'));
    expect(layout.snapshotDir('Snap_2')).toBe(join(base, 'data', 'snapshots', 'Snap_2'));
    expect(layout.imageDir('debian-12.1')).toBe(join(base, 'data', 'images', 'debian-12.1'));
    expect(layout.imageFile('busybox')).toBe(join(base, 'data', 'images', 'busybox', 'rootfs.img'));
  });

  test.each(ATTACKS.map((a) => [JSON.stringify(a.slice(0, 40)), a]))(
    '%s is refused for VMs, snapshots and images',
    (_, id) => {
      const e = invalidArgument(() => layout.vmDir(id));
      expect(e.details).toEqual({ field: 'id' });
      // The message quotes at most 64 characters of what was sent.
      expect(e.message.length).toBeLessThan(300);
      invalidArgument(() => layout.snapshotDir(id));
      invalidArgument(() => layout.imageDir(id));
      invalidArgument(() => layout.imageFile(id));
    },
  );

  test('for any string: refused, or exactly the matching name directly inside its directory', () => {
    fc.assert(
      fc.property(anyId, (id) => {
        for (const [dir, fn, pattern] of [
          [layout.vmsDir, (s: string) => layout.vmDir(s), AGENT_ID],
          [layout.snapshotsDir, (s: string) => layout.snapshotDir(s), AGENT_ID],
          [layout.imagesDir, (s: string) => layout.imageDir(s), IMAGE_NAME],
        ] as const) {
          if (pattern.test(id)) {
            const path = fn(id);
            expect(dirname(path)).toBe(dir);
            expect(basename(path)).toBe(id);
          } else {
            invalidArgument(() => fn(id));
          }
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('image names are checked before the image store touches a path', () => {
  const victim = join(base, 'victim');
  mkdirSync(join(base, 'data', 'images'), { recursive: true });
  mkdirSync(victim, { recursive: true });
  writeFileSync(join(victim, 'image.json'), '{"name":"victim"}\n');
  writeFileSync(join(victim, 'rootfs.img'), 'SENTINEL');
  const store = new ImageStore(layout);

  test('resolve, meta, build and import refuse bad names; nothing outside images/ is touched', async () => {
    await fc.assert(
      fc.asyncProperty(
        anyId.filter((id) => !IMAGE_NAME.test(id)),
        async (name) => {
          let filled = false;
          for (const attempt of [
            () => store.resolve(name),
            () => store.meta(name),
            () =>
              store.build(name, 'x', async () => {
                filled = true;
              }),
            () => importImage(store, layout, name, join(victim, 'rootfs.img')),
            () => importImage(store, layout, name, `oci-archive:${join(victim, 'rootfs.img')}`),
          ]) {
            const err = await attempt().then(
              () => undefined,
              (e: unknown) => e,
            );
            expect(err).toBeInstanceOf(AgentError);
            expect((err as AgentError).code).toBe('invalid_argument');
          }
          expect(filled).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
    expect(readdirSync(victim).sort()).toEqual(['image.json', 'rootfs.img']);
    expect(readdirSync(join(base, 'data', 'images'))).toEqual([]);
    expect(await store.list()).toEqual([]);
  });
});

test("the image booted without spec.image is the protocol's DEFAULT_IMAGE (orchd counts on it)", () => {
  expect(DEFAULT_IMAGE).toBe(PROTOCOL_DEFAULT_IMAGE);
});
