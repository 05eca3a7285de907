/**
 * Sliding window of the last `size` latencies (ms), with a cached percentile recomputed every
 * `size / 16` samples (at least 8), so that asking for the hedge delay costs nothing per request.
 */
export class LatencyWindow {
  private readonly samples: Float64Array;
  private count = 0;
  private next = 0;
  private sinceCompute = 0;
  private cached: number | undefined;
  private readonly recomputeEvery: number;

  constructor(
    private readonly size: number,
    private readonly percentile: number,
  ) {
    this.samples = new Float64Array(size);
    this.recomputeEvery = Math.max(8, Math.floor(size / 16));
  }

  /** Records one latency. */
  add(ms: number): void {
    this.samples[this.next] = ms;
    this.next = (this.next + 1) % this.size;
    if (this.count < this.size) this.count++;
    if (++this.sinceCompute % this.recomputeEvery === 0 || this.cached === undefined) this.compute();
  }

  /** The percentile of the window, or undefined with no samples yet. */
  value(): number | undefined {
    return this.cached;
  }

  private compute(): void {
    const sorted = this.samples.slice(0, this.count).sort();
    const idx = Math.min(this.count - 1, Math.ceil((this.percentile / 100) * this.count) - 1);
    this.cached = sorted[Math.max(0, idx)];
  }
}

/**
 * Hedge budget (Finagle's RetryBudget, simplified to a token bucket): every retryable request
 * deposits `ratio` tokens, a hedge withdraws one; the balance starts at `burst` and is capped at
 * max(burst, 1).
 * Over n requests at most `ratio * n + burst` hedges are sent.
 */
export class HedgeBudget {
  private balance: number;

  constructor(
    private readonly ratio: number,
    private readonly burst: number,
  ) {
    this.balance = burst;
  }

  /** Called once per retryable request. */
  deposit(): void {
    this.balance = Math.min(Math.max(this.burst, 1), this.balance + this.ratio);
  }

  /** Takes one hedge from the budget; false when the budget is spent. */
  tryWithdraw(): boolean {
    if (this.balance < 1) return false;
    this.balance -= 1;
    return true;
  }
}
