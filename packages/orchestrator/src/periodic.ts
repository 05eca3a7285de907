import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';

/**
 * A long-lived loop (STYLE.md, "Long-lived things are services"): `run()` starts calling `tick` now
 * and then every `intervalMs` after each round ends; `stop()` aborts the wait and resolves once the
 * round in progress has finished. A failing round is logged and the loop goes on.
 */
export class Periodic {
  private readonly stopController = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly tick: () => Promise<unknown>,
    private readonly logger: Logger,
  ) {}

  run(): void {
    const signal = this.stopController.signal;
    this.loop = (async () => {
      while (!signal.aborted) {
        await this.tick().catch((err: unknown) =>
          this.logger.warn({ err: (err as Error).message }, `${this.name} round failed`),
        );
        await sleep(this.intervalMs, undefined, { signal }).catch(() => undefined);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopController.abort();
    await this.loop;
  }
}
