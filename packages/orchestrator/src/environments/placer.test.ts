import { OrchError } from '@orch/protocol';
import pino from 'pino';
import { describe, expect, test } from 'vitest';
import type { EnvironmentsRepo } from '../store/environments-repo.js';
import type { HostsRepo } from '../store/hosts-repo.js';
import type { IdempotencyRepo } from '../store/idempotency-repo.js';
import { type PlacementJob, Placer } from './placer.js';

/** A store that answers the hosts read only when the test opens `gate` (placement stays busy). */
function gatedStore() {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const hosts = {
    list: async () => {
      await gate;
      return [];
    },
  } as unknown as HostsRepo;
  const envs = { usage: async () => new Map() } as unknown as EnvironmentsRepo;
  return { hosts, envs, open };
}

const job: PlacementJob = {
  spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 60 },
  decide: () => ({
    ok: false,
    code: 'invalid_argument',
    reason: 'no_host_registered',
    message: 'no microvm host is registered',
  }),
  record: () => {
    throw new Error('never placed');
  },
};

describe('Placer queue bound', () => {
  test('past ORCH_PLACEMENT_QUEUE_MAX a create is refused at once: 503 placement_queue_full with retry_after_seconds and Retry-After', async () => {
    const store = gatedStore();
    const placer = new Placer(
      store.envs,
      store.hosts,
      {} as IdempotencyRepo,
      {
        queueMax: 1,
        batchMax: 10,
        idempotencyRetentionMs: 60_000,
      },
      pino({ level: 'silent' }),
    );
    const first = placer.place(job); // taken by the worker, which waits on the store
    const second = placer.place(job); // waits in the queue (1 of 1)
    expect(placer.queued).toBe(1);
    const refused = await placer.place(job).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OrchError);
    expect(refused).toMatchObject({
      code: 'unavailable',
      status: 503,
      headers: { 'Retry-After': expect.stringMatching(/^\d+$/) },
    });
    expect((refused as OrchError).details).toMatchObject({
      reason: 'placement_queue_full',
      queued: 1,
      retry_after_seconds: expect.any(Number),
    });
    store.open();
    // The two accepted ones get the scheduler's answer, not the queue's.
    for (const p of [first, second])
      await expect(p).rejects.toMatchObject({
        code: 'invalid_argument',
        message: 'no microvm host is registered',
      });
    expect(placer.queued).toBe(0);
  });

  test('stop refuses what still waits: 503, never a hang', async () => {
    const store = gatedStore();
    const placer = new Placer(
      store.envs,
      store.hosts,
      {} as IdempotencyRepo,
      {
        queueMax: 10,
        batchMax: 1,
        idempotencyRetentionMs: 60_000,
      },
      pino({ level: 'silent' }),
    );
    void placer.place(job).catch(() => undefined);
    const waiting = placer.place(job);
    placer.stop();
    await expect(waiting).rejects.toMatchObject({ code: 'unavailable', message: 'orchd is stopping' });
    await expect(placer.place(job)).rejects.toMatchObject({ code: 'unavailable' });
    store.open();
  });
});
