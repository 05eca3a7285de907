import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { randomMac, reidentifyScript, reseedElf } from '../src/vm/guest-identity.js';

const dir = mkdtempSync(join(tmpdir(), 'orch-agent-identity-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('the reseed program is an x86-64 executable that asks the kernel to reseed its CRNG', () => {
  const file = join(dir, 'reseed');
  writeFileSync(file, reseedElf(), { mode: 0o700 });
  // strace shows the one ioctl it makes; its exit status says whether the kernel agreed.
  const r = spawnSync('strace', ['-e', 'trace=open,ioctl,exit', file], { encoding: 'utf8' });
  expect(r.error).toBeUndefined();
  expect(r.stderr).toMatch(/open\("\/dev\/urandom", O_WRONLY\) += 3/);
  const ioctl = /ioctl\(3, RNDRESEEDCRNG\) += (-?\d+)/.exec(r.stderr);
  expect(ioctl).not.toBeNull();
  expect(r.status).toBe(ioctl![1] === '0' ? 0 : 1);
});

test('each VM gets its own locally administered MAC address', () => {
  const macs = Array.from({ length: 200 }, randomMac);
  for (const mac of macs) expect(mac).toMatch(/^52:54:00(:[0-9a-f]{2}){3}$/);
  expect(new Set(macs).size).toBeGreaterThan(190);
});

test('the re-identify script carries fresh entropy each time, and refuses what it cannot quote', () => {
  const one = reidentifyScript('vm-1', '52:54:00:01:02:03');
  const two = reidentifyScript('vm-1', '52:54:00:01:02:03');
  expect(one).not.toBe(two);
  expect(one).toContain('ip link set dev eth0 address 52:54:00:01:02:03');
  expect(one).toContain('hostname vm-1');
  expect(() => reidentifyScript('vm-1', '52:54:00:01:02:03; rm -rf /')).toThrow(/MAC/);
  expect(() => reidentifyScript('$(reboot)', '52:54:00:01:02:03')).toThrow(/VM id/);
});
