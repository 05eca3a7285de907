import { type Host, manifestServices } from '@orch/protocol';
import { describe, expect, test } from 'vitest';
import { gpuDevice, gpuStatus } from '../../test/gpu-hosts.js';
import type { HostUsage } from '../store/environments-repo.js';
import { place } from './scheduler.js';

function host(id: string, over: Partial<Host> = {}): Host {
  return {
    id,
    kind: 'microvm',
    agent_url: `http://${id}:9090`,
    token_source: 'registered',
    arch: 'amd64',
    version: '',
    accelerator: 'tcg',
    state: 'active',
    health: 'healthy',
    health_detail: null,
    capacity: { cpus: 8, ram_mb: 16384, disk_gb: 100 },
    free: { cpus: 8, ram_mb: 16384, disk_gb: 100 },
    images: ['debian-12'],
    image_details: [],
    gpus: [],
    gpu_devices: [],
    gpu_status: null,
    labels: {},
    last_seen_at: null,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    ...over,
  };
}
const spec = { cpus: 2, ram_mb: 2048, storage_gb: 10, max_runtime_seconds: 3600 };
const used = (entries: [string, Partial<HostUsage>][]) =>
  new Map(entries.map(([id, u]) => [id, { cpus: 0, ram_mb: 0, disk_gb: 0, gpus: {}, ...u }]));

const services = (spec: Record<string, { image: string }>) =>
  manifestServices(JSON.stringify({ version: '1', services: spec }));

describe('placement', () => {
  test('a host lacking a service image is not eligible; an image on no host is a 400 naming it and its service', () => {
    const hosts = [
      host('a', { images: ['debian-12', 'web-1'] }),
      host('b', { images: ['debian-12', 'postgres-16'] }),
    ];
    const both = services({ web: { image: 'web-1' }, db: { image: 'postgres:16' } });
    expect(
      place(hosts, used([]), { spec, services: services({ db: { image: 'postgres:16' } }) }),
    ).toMatchObject({
      ok: true,
      host: { id: 'b' },
    });
    expect(place(hosts, used([]), { spec, services: both })).toMatchObject({
      ok: false,
      code: 'invalid_argument',
      message: expect.stringContaining('no host has the images of all services'),
    });
    expect(
      place(hosts, used([]), { spec, services: services({ cache: { image: 'reg.local/redis:7' } }) }),
    ).toEqual({
      ok: false,
      code: 'invalid_argument',
      reason: 'never_fits',
      message: 'service "cache": image "reg.local/redis:7" (image name redis-7) is on no microvm host',
    });
  });

  test('spreads load: the host left with the most free share wins', () => {
    const r = place([host('a'), host('b')], used([['a', { cpus: 4 }]]), { spec });
    expect(r.ok && r.host.id).toBe('b');
  });

  test('skips cordoned, unhealthy and full hosts, and says why when none is left', () => {
    const hosts = [host('a', { state: 'cordoned' }), host('b', { health: 'unreachable' }), host('c')];
    expect(place(hosts, used([]), { spec }).ok && 'c').toBe('c');
    const r = place(hosts, used([['c', { cpus: 7 }]]), { spec });
    expect(r).toEqual({
      ok: false,
      code: 'unavailable',
      reason: 'no_capacity',
      message:
        'no host can take this environment now: a: cordoned; b: health unreachable; c: 1 of 2 cpus free',
    });
  });

  test('what no host could ever run is invalid_argument, naming what is missing', () => {
    expect(place([host('a')], used([]), { spec: { ...spec, cpus: 64, image: 'arch' } })).toEqual({
      ok: false,
      code: 'invalid_argument',
      reason: 'never_fits',
      message:
        'no registered microvm host could ever run this: image "arch" is on no host; 64 cpus (largest host has fewer)',
    });
    expect(place([host('a')], used([]), { spec: { ...spec, gpu: { model: 'h100', count: 1 } } })).toEqual({
      ok: false,
      code: 'invalid_argument',
      reason: 'no_host_registered',
      message: 'no gpu host is registered',
    });
  });

  test('GPU requests go through gpu-fit: fits, never fits (what is missing), not now (held)', () => {
    const gpuHost = host('g', {
      kind: 'gpu',
      gpu_devices: [gpuDevice('0000:18:00.0'), gpuDevice('0000:19:00.0')],
      gpu_status: gpuStatus(),
    });
    const gpu = (g: { model: string; count: number; mig?: string }) => ({ spec: { ...spec, gpu: g } });
    expect(place([gpuHost], used([]), gpu({ model: 'h100', count: 2 })).ok).toBe(true);
    expect(place([gpuHost], used([]), gpu({ model: 'h200', count: 1 }))).toEqual({
      ok: false,
      code: 'invalid_argument',
      reason: 'never_fits',
      message: 'no registered gpu host could ever run this: g: no h200 GPU (it has 2x h100)',
    });
    expect(place([gpuHost], used([['g', { gpus: { h100: 2 } }]]), gpu({ model: 'h100', count: 1 }))).toEqual({
      ok: false,
      code: 'unavailable',
      reason: 'no_capacity',
      message: 'no host can take this environment now: g: 0 of 1 h100 GPUs free',
    });
  });

  test('a restore goes to the snapshot host only', () => {
    expect(place([host('a'), host('b')], used([]), { spec, onHost: 'a' }).ok && 'a').toBe('a');
    expect(place([host('a')], used([]), { spec, onHost: 'z' })).toMatchObject({ code: 'invalid_argument' });
  });
});
