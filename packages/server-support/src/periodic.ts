import type { Logger } from './logger.js';
import type { Service } from './service.js';
import { sleep as realSleep, type Sleep } from './sleep.js';

/** What {@link Periodic} needs. */
export interface PeriodicOptions {
  /** Names the loop in logs (`<name> round failed`). */
  readonly name: string;
  /** Pause between the end of one round and the start of the next. */
  readonly intervalMs: number;
  /** One round; `now` comes from the clock, `signal` aborts when the loop is asked to stop. */
  readonly tick: (round: { now: Date; signal: AbortSignal }) => Promise<unknown>;
  readonly log: Pick<Logger, 'warn'>;
  /** Wait one interval before the first round (default: the first round starts at once). */
  readonly delayFirst?: boolean;
  /** How to wait; tests pass one they control. */
  readonly sleep?: Sleep;
  /** The clock handed to each round (ms since the epoch). */
  readonly clock?: () => number;
}

/**
 * A loop as a {@link Service}: a round now (or after one interval with `delayFirst`), then one
 * every `intervalMs` after each round ends, until the signal aborts; `run()` resolves once the
 * round in progress has finished. A failing round is logged and the loop goes on.
 * @example
 * const sweep = new Periodic({ name: 'retention', intervalMs: 60_000, log, tick: () => sweepOnce() });
 * await sweep.run(signal);
 */
export class Periodic implements Service {
  readonly name: string;

  constructor(private readonly options: PeriodicOptions) {
    this.name = options.name;
  }

  async run(signal: AbortSignal): Promise<void> {
    const { intervalMs, tick, log } = this.options;
    const wait = this.options.sleep ?? realSleep;
    const clock = this.options.clock ?? Date.now;
    if (this.options.delayFirst) await wait(intervalMs, signal);
    while (!signal.aborted) {
      try {
        await tick({ now: new Date(clock()), signal });
      } catch (err) {
        log.warn({ err }, `${this.name} round failed`);
      }
      if (signal.aborted) break;
      await wait(intervalMs, signal);
    }
  }
}
