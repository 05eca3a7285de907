import { execFileSync } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import { AgentError } from '../src/errors.js';
import { imageEnvFile } from '../src/images/image-store.js';
import { parseImportSource } from '../src/images/oci-import.js';
import { defaultImageName, formatRegistryRef, parseRegistryRef } from '../src/images/registry-pull.js';

describe('image import sources', () => {
  test('the transports and a plain tarball path', () => {
    expect(parseImportSource('/x/rootfs.tar.gz')).toEqual({ kind: 'tarball', path: '/x/rootfs.tar.gz' });
    expect(parseImportSource('oci-archive:/x/a.tar')).toEqual({ kind: 'oci-archive', path: '/x/a.tar' });
    expect(parseImportSource('oci-archive:/x/a.tar:v1')).toEqual({
      kind: 'oci-archive',
      path: '/x/a.tar',
      ref: 'v1',
    });
    expect(parseImportSource('oci:/x/layout:v2')).toEqual({ kind: 'oci', path: '/x/layout', ref: 'v2' });
    expect(parseImportSource('docker-archive:/x/d.tar')).toEqual({
      kind: 'docker-archive',
      path: '/x/d.tar',
    });
  });

  test('oci: without a tag is refused with the form to use', () => {
    expect(() => parseImportSource('oci:/x/layout')).toThrow(AgentError);
    expect(() => parseImportSource('oci:/x/layout')).toThrow('as oci:DIR:TAG');
  });
});

describe('registry references', () => {
  test('host[:port]/path/name with a tag, a digest, or neither', () => {
    const digest = `sha256:${'a'.repeat(64)}`;
    expect(parseRegistryRef('127.0.0.1:5000/tools/box:v2')).toEqual({
      registry: '127.0.0.1:5000',
      repository: 'tools/box',
      tag: 'v2',
    });
    expect(parseRegistryRef(`docker://reg.example/box@${digest}`)).toEqual({
      registry: 'reg.example',
      repository: 'box',
      digest,
    });
    expect(formatRegistryRef(parseRegistryRef('reg.example/box'))).toBe('docker://reg.example/box:latest');
    expect(defaultImageName(parseRegistryRef('reg.example/a/Box_x:1.2'.toLowerCase()))).toBe('box_x-1.2');
    expect(defaultImageName(parseRegistryRef(`reg.example/box@${digest}`))).toBe('box-aaaaaaaaaaaa');
  });

  test.each([
    ['box:1', 'name the registry'],
    ['reg.example/Box:1', 'is not a repository name'],
    ['reg.example/box@sha256:12', 'the digest must be sha256: and 64 hex digits'],
    ['reg.example/box:bad tag', 'is not a tag'],
    ['reg ex/box:1', 'is not host[:port]'],
  ])('%s is refused: %s', (ref, message) => {
    expect(() => parseRegistryRef(ref)).toThrow(message);
  });
});

test("/orch/image.env quotes every value for the guest's sh and skips names a shell cannot export", () => {
  const text = imageEnvFile(['PATH=/custom/bin:/bin', "Q=it's $HOME `x`", 'EMPTY=', 'bad-name=1', 'NOEQ']);
  expect(text).toBe("export PATH='/custom/bin:/bin'\nexport Q='it'\\''s $HOME `x`'\nexport EMPTY=''\n");
  const out = execFileSync('sh', ['-c', `${text}\nprintf '%s|%s' "$Q" "$PATH"`], { encoding: 'utf8' });
  expect(out).toBe("it's $HOME `x`|/custom/bin:/bin");
});
