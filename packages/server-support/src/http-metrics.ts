import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

/** Methods kept as they are in the `method` label; anything else is `OTHER` (bounded cardinality). */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Route label of a request no route matched (its raw path is never a label). */
export const UNMATCHED_ROUTE = 'unmatched';

/** Latency buckets (seconds) of the HTTP histogram: 1 ms to 60 s. */
export const HTTP_LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * A Prometheus registry of one server, with the conventional process and Node.js metrics
 * (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `nodejs_eventloop_lag_seconds`, ...).
 * One registry per server instance, never prom-client's global one, so several servers can share a
 * process (tests).
 */
export function createMetricsRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** The exchange an HTTP-metrics middleware sees: structurally a Hono `Context`. */
export interface MeasuredExchange {
  readonly req: { readonly method: string };
  readonly res: { readonly status: number };
}

/**
 * HTTP requests by route template, method and status, with a latency histogram, in one shape for
 * every server: `<prefix>_http_requests_total{route,method,status}` and
 * `<prefix>_http_request_duration_seconds{route,method,status}`. The route is the template the
 * server matched (`/v1/environments/:id`), never the raw path; unmatched requests are `unmatched`.
 * @example
 * const http = new HttpMetrics(registry, 'orchd');
 * app.use('*', http.middleware((c) => routePath(c, -1)));
 */
export class HttpMetrics {
  private readonly requests: Counter<'route' | 'method' | 'status'>;
  private readonly duration: Histogram<'route' | 'method' | 'status'>;

  constructor(
    readonly registry: Registry,
    prefix: string,
  ) {
    this.requests = new Counter({
      name: `${prefix}_http_requests_total`,
      help: 'HTTP requests answered, by route template, method and status',
      labelNames: ['route', 'method', 'status'] as const,
      registers: [registry],
    });
    this.duration = new Histogram({
      name: `${prefix}_http_request_duration_seconds`,
      help: 'Time to the answer head (a stream counts until it starts), by route template, method and status',
      labelNames: ['route', 'method', 'status'] as const,
      buckets: HTTP_LATENCY_BUCKETS,
      registers: [registry],
    });
  }

  /** Records one answered request. `route` must be a template (bounded), never a raw path. */
  observe(route: string, method: string, status: number, seconds: number): void {
    const labels = {
      route,
      method: METHODS.has(method.toUpperCase()) ? method.toUpperCase() : 'OTHER',
      status: String(status),
    };
    this.requests.inc(labels);
    this.duration.observe(labels, seconds);
  }

  /**
   * A middleware (Hono's shape) measuring every request it wraps: register it first. `routeOf`
   * names the matched template; `*` or an empty answer counts as `unmatched`.
   */
  middleware<C extends MeasuredExchange>(
    routeOf: (c: C) => string | undefined,
  ): (c: C, next: () => Promise<void>) => Promise<void> {
    return async (c, next) => {
      const started = process.hrtime.bigint();
      try {
        await next();
      } finally {
        const template = routeOf(c);
        const route = !template || template === '*' || template === '/*' ? UNMATCHED_ROUTE : template;
        this.observe(route, c.req.method, c.res.status, Number(process.hrtime.bigint() - started) / 1e9);
      }
    };
  }
}

/** The text exposition of `registry`, with its content type, for a `GET /metrics` answer. */
export async function metricsAnswer(registry: Registry): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}
