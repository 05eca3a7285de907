/** One read's deadline as the read sees it (see {@link ReadDeadline.race}). */
export interface Deadline {
  /** Throws the read's timeout failure once the deadline has passed; else nothing. */
  readonly check: () => void;
  /** Whether the deadline has passed. */
  readonly passed: boolean;
}

/**
 * The deadline of the reads on one DuckDB connection, kept whatever DuckDB does: when it passes,
 * the connection is interrupted and the read is answered at once, without waiting for the DuckDB
 * call under way. Some calls do not heed an interrupt until they return (one function call that
 * builds a huge value: `repeat('x', 2000000000)`, `range(100000000)` as a list); such a call runs
 * on, abandoned, and the connection stays {@link busy} until it returns. A read that finds the
 * connection busy waits for it within its own deadline, so two statements never run on one
 * connection at once.
 *
 *   idle ──race──▶ running ──body settles first──▶ idle
 *                     │
 *                     └──deadline passes first: interrupt, answer the timeout──▶ busy
 *   busy ──the abandoned call returns──▶ idle
 *   busy ──race──▶ waits for the abandoned call (within its deadline), then running
 */
export class ReadDeadline {
  /** A DuckDB call of a read already answered that has not returned yet (see {@link busy}). */
  private abandoned: Promise<void> | undefined;

  /** `interrupt` interrupts the connection's running DuckDB call. */
  constructor(private readonly interrupt: () => void) {}

  /**
   * True while a DuckDB call of a read already answered (its deadline passed) is still running on
   * the connection; {@link settled} resolves when it returns. The pool hands the connection to no
   * other query before then.
   */
  get busy(): boolean {
    return this.abandoned !== undefined;
  }

  /** Resolves once no abandoned DuckDB call runs on the connection (see {@link busy}). */
  async settled(): Promise<void> {
    await this.abandoned;
  }

  /**
   * Runs `body` (after any abandoned call on the connection returned) against a deadline of
   * `timeoutMs`: whichever settles first answers. At the deadline the connection is interrupted
   * (unless an abandoned call, interrupted already, still runs) and the answer is `timeout()`; a
   * body still running then makes the connection {@link busy} until it settles. `body` checks the
   * deadline after each await it makes (`deadline.check`).
   */
  async race<T>(
    timeoutMs: number,
    timeout: () => Error,
    body: (deadline: Deadline) => Promise<T>,
  ): Promise<T> {
    const previous = this.abandoned;
    let passed = false;
    const deadline: Deadline = {
      check: () => {
        if (passed) throw timeout();
      },
      get passed() {
        return passed;
      },
    };
    let expire: (err: Error) => void = () => undefined;
    const expired = new Promise<never>((_resolve, reject) => {
      expire = reject;
    });
    const timer = setTimeout(() => {
      passed = true;
      // Not while an earlier abandoned call still runs: that one was interrupted already.
      if (!this.abandoned) this.interrupt();
      expire(timeout());
    }, timeoutMs);
    const work = (async () => {
      if (previous) await previous;
      deadline.check();
      return await body(deadline);
    })();
    let done = false;
    const ended = work.then(
      () => {
        done = true;
      },
      () => {
        done = true;
      },
    );
    try {
      return await Promise.race([work, expired]);
    } finally {
      clearTimeout(timer);
      if (!done) {
        const mark = ended.then(() => {
          if (this.abandoned === mark) this.abandoned = undefined;
        });
        this.abandoned = mark;
      }
    }
  }
}
