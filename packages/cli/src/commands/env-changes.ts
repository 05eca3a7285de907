import type { OrchClient } from '../api-client.js';
import { readEventStream } from '../event-stream.js';

/**
 * Changes of one environment's record, from the orchestrator's event stream (`GET /v1/events`):
 * `next(ms)` resolves `'changed'` once an `environment.*` event names `envId` (or one came since the
 * last call), else `'quiet'` after `ms`. When the stream cannot be had (an older orchd, a proxy
 * that buffers) or stops being usable (dropped, a line past the line limit of `readEventStream`),
 * `live` is false and every wait is quiet: the caller then reads the record itself.
 */
export class EnvChanges {
  live = false;
  private pending = false;
  private wake: (() => void) | undefined;
  private readonly stop = new AbortController();

  private constructor(private readonly envId: string) {}

  /** Subscribes; resolves once the stream is open (or known to be unavailable). */
  static async open(api: OrchClient, envId: string): Promise<EnvChanges> {
    const changes = new EnvChanges(envId);
    try {
      const res = await api.open('/v1/events', changes.stop.signal);
      changes.live = true;
      void changes.read(res);
    } catch {
      changes.live = false;
    }
    return changes;
  }

  next(ms: number): Promise<'changed' | 'quiet'> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve('changed');
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve('quiet');
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        this.pending = false;
        resolve('changed');
      };
    });
  }

  close(): void {
    this.stop.abort();
  }

  private async read(res: Response): Promise<void> {
    try {
      if (!res.body) return;
      await readEventStream(res.body, (m) => {
        if (!m.event?.startsWith('environment.')) return;
        let id: unknown;
        try {
          id = (JSON.parse(m.data) as { id?: unknown }).id;
        } catch {
          return;
        }
        if (id !== this.envId) return;
        this.pending = true;
        this.wake?.();
      });
    } catch {
      // closed by close(), dropped, or a line past the limit: the caller polls
    } finally {
      this.live = false;
    }
  }
}
