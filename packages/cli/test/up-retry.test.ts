import type { IncomingMessage } from 'node:http';
import { describe, expect } from 'vitest';
import { json, test } from './fake-orchd.js';
import { runOrchAsync } from './run-orch.js';

/** A running environment as orchd answers it (so `orch up` has nothing to wait for). */
const RUNNING = {
  id: 'env_retry0000000001',
  task_id: 'hello',
  state: 'running',
  host_id: 'h1',
  spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600, image: 'busybox' },
  expose: [{ port: 8080, as: 'web' }],
  ports: [],
  secret_names: [],
  services: [],
  seed_snapshot_id: null,
  restored_from_snapshot_id: null,
  last_error: null,
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-01T00:00:00.000Z',
  started_at: '2026-01-01T00:00:01.000Z',
  expires_at: '2026-01-01T01:00:01.000Z',
  stopped_at: null,
  last_move: null,
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The Idempotency-Key of each create the fake orchd received. */
function keysOf(req: IncomingMessage, keys: (string | undefined)[]): void {
  const key = req.headers['idempotency-key'];
  keys.push(typeof key === 'string' ? key : undefined);
}

describe('orch up sends an Idempotency-Key and reuses it on its own retries', () => {
  test('no answer, then a full queue (retry_after_seconds), then the environment: three posts, one key', async ({
    orchd,
    config,
  }) => {
    config.connectTo(orchd.url);
    const keys: (string | undefined)[] = [];
    orchd.answer((req, res) => {
      if (req.method !== 'POST') return json(RUNNING)(req, res);
      keysOf(req, keys);
      if (keys.length === 1) return void req.socket.destroy(); // the create may have happened
      if (keys.length === 2) {
        return json(
          {
            error: {
              code: 'unavailable',
              message: 'this orchd has 1024 creates waiting for placement',
              details: { reason: 'placement_queue_full', retry_after_seconds: 1 },
            },
          },
          503,
        )(req, res);
      }
      json(RUNNING, 201)(req, res);
    });
    const r = await runOrchAsync(['up', 'examples/hello'], config.dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(RUNNING.id);
    expect(keys).toHaveLength(3);
    expect(keys[0]).toMatch(UUID);
    expect(new Set(keys).size).toBe(1);
    expect(r.stderr).toMatch(/retrying in 1 s with the same Idempotency-Key \(2 of 4\)/);
    expect(r.stderr).toMatch(/placement_queue_full|creates waiting/);
  });

  test('a refusal without retry_after_seconds (no capacity, a conflict) is final: one post', async ({
    orchd,
    config,
  }) => {
    config.connectTo(orchd.url);
    const keys: (string | undefined)[] = [];
    orchd.answer((req, res) => {
      keysOf(req, keys);
      json(
        {
          error: {
            code: 'unavailable',
            message: 'no host can take this environment now: h1: 0 of 1 cpus free',
          },
        },
        503,
      )(req, res);
    });
    const r = await runOrchAsync(['up', 'examples/hello'], config.dir);
    expect(r.code).toBe(1);
    expect(keys).toHaveLength(1);
    expect(r.stderr).toBe(
      'orch: no host can take this environment now: h1: 0 of 1 cpus free (unavailable)\n',
    );
  });

  test('two runs of orch up send two different keys (each invocation is a new create)', async ({
    orchd,
    config,
  }) => {
    config.connectTo(orchd.url);
    const keys: (string | undefined)[] = [];
    orchd.answer((req, res) => {
      if (req.method === 'POST') keysOf(req, keys);
      json(RUNNING, req.method === 'POST' ? 201 : 200)(req, res);
    });
    for (let i = 0; i < 2; i++)
      expect((await runOrchAsync(['up', 'examples/hello'], config.dir)).code).toBe(0);
    expect(keys).toHaveLength(2);
    expect(keys[0]).not.toBe(keys[1]);
  });
});
