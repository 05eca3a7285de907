/** Time constant of a node's latency average, in ms (Finagle's peak EWMA uses 10 s). */
export const BALANCER_DECAY_MS = 5_000;

interface Load {
  /** Peak-sensitive moving average of the node's latency (ms) as of `at`. */
  ewma: number;
  at: number;
  inFlight: number;
}

/**
 * Latency-aware choice of a node: power of two choices over a peak EWMA of each node's latency,
 * as Finagle's and Linkerd's balancers do. For each first attempt two distinct candidates are
 * drawn at random and the one with the lower cost wins; cost = average latency x (requests in
 * flight + 1). The average jumps up to a slower sample at once (peak) and moves down towards faster
 * ones with time constant `decayMs`; between samples it decays towards 0 with the same constant,
 * so a node that stopped getting traffic because it was slow is tried again after a while (and
 * re-measured) rather than shunned forever. A node without samples costs 0 (tried first). With
 * equal latencies the choice is uniformly random, like round robin on average.
 */
export class LatencyBalancer<N> {
  private readonly loads = new Map<N, Load>();
  private readonly decayMs: number;
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(opts: { decayMs?: number; now?: () => number; random?: () => number } = {}) {
    this.decayMs = opts.decayMs ?? BALANCER_DECAY_MS;
    this.now = opts.now ?? (() => performance.now());
    this.random = opts.random ?? Math.random;
  }

  /** An attempt was sent to `node`. */
  started(node: N): void {
    this.load(node).inFlight++;
  }

  /** An attempt on `node` ended after `ms` (answered, failed or cancelled: at least that slow). */
  finished(node: N, ms: number): void {
    const l = this.load(node);
    l.inFlight = Math.max(0, l.inFlight - 1);
    const now = this.now();
    const current = this.decayed(l, now);
    l.ewma = ms > current ? ms : ms + (current - ms) * Math.exp(-(now - l.at) / this.decayMs);
    l.at = now;
  }

  /** The node's current cost (see the class comment). */
  cost(node: N): number {
    const l = this.loads.get(node);
    return l ? this.decayed(l, this.now()) * (l.inFlight + 1) : 0;
  }

  /** Power of two choices among `candidates`; undefined when there are none. */
  choose(candidates: readonly N[]): N | undefined {
    const n = candidates.length;
    if (n <= 1) return candidates[0];
    const i = Math.floor(this.random() * n);
    let j = Math.floor(this.random() * (n - 1));
    if (j >= i) j++;
    const a = candidates[i] as N;
    const b = candidates[j] as N;
    return this.cost(b) < this.cost(a) ? b : a;
  }

  private decayed(l: Load, now: number): number {
    return l.ewma * Math.exp(-(now - l.at) / this.decayMs);
  }

  private load(node: N): Load {
    let l = this.loads.get(node);
    if (!l) {
      l = { ewma: 0, at: this.now(), inFlight: 0 };
      this.loads.set(node, l);
    }
    return l;
  }
}
