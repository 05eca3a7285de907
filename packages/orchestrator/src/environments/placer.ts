import { gpuKey, type Host, OrchError, type VmSpec } from '@orch/protocol';
import type { Logger } from 'pino';
import type { OrchdMetrics, PlacementOutcomeLabel } from '../metrics.js';
import type {
  EnvironmentRow,
  EnvironmentsRepo,
  HostUsage,
  NewEnvironment,
} from '../store/environments-repo.js';
import type { HostsRepo } from '../store/hosts-repo.js';
import type { IdempotencyClaim, IdempotencyRecord, IdempotencyRepo } from '../store/idempotency-repo.js';
import { fitsNow, type Placement } from './scheduler.js';

/** One create waiting for placement. */
export interface PlacementJob {
  readonly spec: VmSpec;
  /**
   * Where it may go, given the hosts and the capacity held on them (the scheduler's `place`, or a
   * restore's rules). May throw an `OrchError` (a snapshot that cannot travel).
   */
  readonly decide: (hosts: readonly Host[], usage: ReadonlyMap<string, HostUsage>) => Placement;
  /** The record to write once it has a host. */
  readonly record: (hostId: string) => NewEnvironment;
  /** Its idempotency key, claimed in the transaction that writes the record. */
  readonly claim?: IdempotencyClaim;
}

/** A placed create (its record written in `creating`), or the environment its key already names. */
export type PlacementOutcome =
  | { readonly kind: 'placed'; readonly row: EnvironmentRow }
  | { readonly kind: 'replay'; readonly record: IdempotencyRecord };

export interface PlacerOptions {
  /** Creates that may wait; one more is refused at once (`503`, `placement_queue_full`). */
  readonly queueMax: number;
  /** Waiting creates placed together in one transaction. */
  readonly batchMax: number;
  /** How long an idempotency key is remembered. */
  readonly idempotencyRetentionMs: number;
}

/** Times a create goes back to the queue because another orchd filled its host meanwhile. */
const MAX_TRIES = 20;
/** Window over which the decision rate (for `retry_after_seconds`) is measured. */
const RATE_WINDOW_MS = 10_000;

interface Pending {
  readonly job: PlacementJob;
  tries: number;
  settled: boolean;
  resolve(outcome: PlacementOutcome): void;
  reject(err: unknown): void;
}

const EMPTY: HostUsage = { cpus: 0, ram_mb: 0, disk_gb: 0, gpus: {} };

/**
 * Placement of creates on this orchd: an in-process queue in front of the store, so a create
 * waiting for its turn holds no database connection, and a burst costs one connection per orchd.
 * One worker takes up to `batchMax` waiting creates at a time:
 *
 * 1. reads the hosts and the capacity held on each (no lock), and decides each create in turn
 *    against that view (adding what it gives each create, so a batch spreads like single creates);
 * 2. in one transaction, locks the rows of the hosts it chose (`EnvironmentsRepo.withHostLocks`:
 *    only those, in id order), reads their capacity again, and checks each create against it:
 *    what still fits is written (idempotency keys claimed in the same transaction), what another
 *    orchd took meanwhile goes back to the front of the queue and is decided again on a fresh view.
 *
 * Creates on different hosts never wait for each other across orchds; creates on one host wait for
 * the transaction holding it (a few statements), and capacity is never given twice (the check runs
 * under the lock, on committed data).
 */
export class Placer {
  private queue: Pending[] = [];
  private running = false;
  private stopped = false;
  private readonly decided: { at: number; n: number }[] = [];

  constructor(
    private readonly repo: EnvironmentsRepo,
    private readonly hostsRepo: HostsRepo,
    private readonly keys: IdempotencyRepo,
    private readonly opts: PlacerOptions,
    private readonly logger: Logger,
    private readonly metrics?: OrchdMetrics,
  ) {}

  /** Creates waiting now. */
  get queued(): number {
    return this.queue.length;
  }

  /**
   * Queues a create for placement; resolves once its record is written (or its key found), rejects
   * with the scheduler's refusal (`400`/`503`), a full queue (`503` with `retry_after_seconds`) or a
   * store failure.
   */
  place(job: PlacementJob): Promise<PlacementOutcome> {
    if (this.stopped) return Promise.reject(OrchError.unavailable('orchd is stopping'));
    if (this.queue.length >= this.opts.queueMax) {
      this.metrics?.placements.inc({ outcome: 'queue_full' satisfies PlacementOutcomeLabel });
      const wait = this.retryAfterSeconds();
      return Promise.reject(
        OrchError.busy(
          `this orchd has ${this.queue.length} creates waiting for placement, its limit (ORCH_PLACEMENT_QUEUE_MAX); try again in ${wait} s`,
          'placement_queue_full',
          wait,
          { queued: this.queue.length },
        ),
      );
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ job, tries: 0, settled: false, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  /** Refuses everything still waiting (orchd is stopping). */
  stop(): void {
    this.stopped = true;
    for (const p of this.queue.splice(0)) settle(p, OrchError.unavailable('orchd is stopping'));
  }

  /** Seconds until the queue has room again at the recent decision rate (1 to 60). */
  retryAfterSeconds(): number {
    const now = Date.now();
    while (this.decided.length > 0 && this.decided[0]!.at < now - RATE_WINDOW_MS) this.decided.shift();
    const rate = this.decided.reduce((sum, d) => sum + d.n, 0) / (RATE_WINDOW_MS / 1000);
    return Math.min(60, Math.max(1, Math.ceil(this.queue.length / Math.max(rate, 1))));
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0 && !this.stopped) {
        const batch = this.queue.splice(0, this.opts.batchMax);
        try {
          await this.placeBatch(batch);
        } catch (err) {
          // A deadlock or serialization failure is the store asking to try again.
          const code = (err as { code?: unknown }).code;
          const again = (code === '40P01' || code === '40001') && batch.every((p) => p.tries < MAX_TRIES);
          if (again) {
            for (const p of batch) p.tries++;
            this.queue.unshift(...batch.filter((p) => !p.settled));
          } else {
            this.logger.warn({ err: (err as Error).message, creates: batch.length }, 'placement failed');
            for (const p of batch) settle(p, err);
          }
        }
      }
    } finally {
      this.running = false;
    }
  }

  private async placeBatch(batch: Pending[]): Promise<void> {
    const hosts = (await this.hostsRepo.list()).map((h) => h.host);
    const view = cloneUsage(await this.repo.usage());
    const chosen: { p: Pending; hostId: string }[] = [];
    for (const p of batch) {
      let placement: Placement;
      try {
        placement = p.job.decide(hosts, view);
      } catch (err) {
        settle(p, err);
        continue;
      }
      if (!placement.ok) {
        this.metrics?.placements.inc({ outcome: placement.reason });
        settle(p, new OrchError(placement.code, placement.message));
        continue;
      }
      add(view, placement.host.id, p.job.spec);
      chosen.push({ p, hostId: placement.host.id });
    }
    if (chosen.length === 0) return;
    const cutoff = new Date(Date.now() - this.opts.idempotencyRetentionMs);
    const retry: Pending[] = [];
    const done = await this.repo.withHostLocks(
      chosen.map((c) => c.hostId),
      async (trx, locked, fresh) => {
        const byId = new Map(locked.map((h) => [h.id, h]));
        const fits: { p: Pending; record: NewEnvironment }[] = [];
        for (const { p, hostId } of chosen) {
          const host = byId.get(hostId);
          const u = fresh.get(hostId) ?? { ...EMPTY, gpus: {} };
          if (!host || fitsNow(host, u, p.job.spec) !== undefined) {
            retry.push(p);
            continue;
          }
          fresh.set(hostId, u);
          add(fresh, hostId, p.job.spec);
          fits.push({ p, record: p.job.record(hostId) });
        }
        // One claim per key and batch: a second create with the same key waits for the next batch,
        // where it finds the first one's environment.
        const claimed = new Set<string>();
        const claims: IdempotencyClaim[] = [];
        for (let i = 0; i < fits.length; i++) {
          const claim = fits[i]!.p.job.claim;
          if (!claim) continue;
          const k = `${claim.scope} ${claim.key}`;
          if (claimed.has(k)) {
            retry.push(fits[i]!.p);
            fits.splice(i--, 1);
            continue;
          }
          claimed.add(k);
          claims.push(claim);
        }
        const taken = await this.keys.claim(trx, claims, cutoff);
        const inserts: typeof fits = [];
        const replays: { p: Pending; record: IdempotencyRecord }[] = [];
        for (const f of fits) {
          const claim = f.p.job.claim;
          if (!claim || taken.has(`${claim.scope} ${claim.key}`)) {
            inserts.push(f);
            continue;
          }
          const record = await this.keys.find(claim.scope, claim.key, cutoff, trx);
          if (record) replays.push({ p: f.p, record });
          else retry.push(f.p); // released meanwhile: decide again
        }
        const rows = await this.repo.insertMany(
          inserts.map((i) => i.record),
          trx,
        );
        return { placed: inserts.map((i, n) => ({ p: i.p, row: rows[n]! })), replays };
      },
    );
    for (const { p, row } of done.placed) {
      this.metrics?.placements.inc({ outcome: 'placed' });
      settle(p, undefined, { kind: 'placed', row });
    }
    for (const { p, record } of done.replays) settle(p, undefined, { kind: 'replay', record });
    this.decided.push({ at: Date.now(), n: done.placed.length + done.replays.length });
    for (const p of retry) {
      if (++p.tries >= MAX_TRIES) {
        this.metrics?.placements.inc({ outcome: 'contended' satisfies PlacementOutcomeLabel });
        settle(
          p,
          OrchError.busy(
            `other orchds kept taking the capacity chosen for this environment (${MAX_TRIES} tries); try again in a moment`,
            'placement_contended',
            1,
          ),
        );
      }
    }
    this.queue.unshift(...retry.filter((p) => !p.settled));
  }
}

function settle(p: Pending, err: unknown, outcome?: PlacementOutcome): void {
  if (p.settled) return;
  p.settled = true;
  if (outcome) p.resolve(outcome);
  else p.reject(err);
}

function cloneUsage(usage: ReadonlyMap<string, HostUsage>): Map<string, HostUsage> {
  return new Map([...usage].map(([id, u]) => [id, { ...u, gpus: { ...u.gpus } }]));
}

/** Adds what `spec` holds to host `hostId`'s usage in `usage`. */
function add(usage: Map<string, HostUsage>, hostId: string, spec: VmSpec): void {
  const u = usage.get(hostId) ?? { ...EMPTY, gpus: {} };
  u.cpus += spec.cpus;
  u.ram_mb += spec.ram_mb;
  u.disk_gb += spec.storage_gb;
  if (spec.gpu) u.gpus[gpuKey(spec.gpu)] = (u.gpus[gpuKey(spec.gpu)] ?? 0) + spec.gpu.count;
  usage.set(hostId, u);
}
