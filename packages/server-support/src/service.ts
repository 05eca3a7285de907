/**
 * A long-lived thing (a server, a loop, a watcher): `run(signal)` starts it and resolves once it
 * has stopped, which it does when `signal` aborts. A rejection means it could not start or failed
 * while running. The model is Rocicorp Zero's `Service`, with the stop request carried by the
 * signal instead of a `stop()` method.
 * @example
 * const life = new AbortController();
 * const running = service.run(life.signal);
 * // ... later:
 * life.abort();
 * await running;
 */
export interface Service {
  /** Names the service in logs. */
  readonly name: string;
  /** Runs until `signal` aborts; resolves once everything it started has stopped. */
  run(signal: AbortSignal): Promise<void>;
}

/**
 * Runs several services side by side until `signal` aborts. If one of them fails, the others are
 * stopped too and the first failure is rethrown once all have stopped.
 */
export async function runServices(signal: AbortSignal, services: readonly Service[]): Promise<void> {
  const life = new AbortController();
  const onAbort = () => life.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  if (signal.aborted) life.abort();
  try {
    const results = await Promise.allSettled(
      services.map((s) =>
        s.run(life.signal).catch((err: unknown) => {
          life.abort();
          throw err;
        }),
      ),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** Resolves once `signal` aborts (at once if it already has): the wait of a server's `run()`. */
export function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/** A server that starts, then serves until stopped (the shape of orchd's and the agent's process). */
export interface Startable {
  /** Starts everything; resolves with the URL it serves once requests are served. */
  start(): Promise<string>;
  /** Stops what started (also after a partial start); idempotent. */
  stop(): Promise<void>;
}

/**
 * The `run(signal)` of a {@link Startable}: starts it (a failure undoes what had started and is
 * rethrown as `cannot start: ...`), calls `onListening` with its URL, waits for `signal`, stops.
 */
export async function serveUntilAborted(
  signal: AbortSignal,
  server: Startable,
  onListening: (url: string) => void,
): Promise<void> {
  let url: string;
  try {
    url = await server.start();
  } catch (err) {
    await server.stop().catch(() => undefined);
    throw new Error(`cannot start: ${(err as Error).message}`, { cause: err });
  }
  onListening(url);
  await untilAborted(signal);
  await server.stop();
}
