import pg from 'pg';

/**
 * Has PostgreSQL (at `url`) terminate the session listening on `channel` `times` times, each time
 * waiting (up to `timeoutMs`) until the listener under test has listened again from a new session.
 * For tests of a LISTEN loop's reconnects; throws when the listener does not come back.
 */
export async function dropListenSession(
  url: string,
  channel: string,
  times: number,
  timeoutMs = 20_000,
): Promise<void> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    const listening = async () =>
      (
        await admin.query<{ pid: number }>(
          'SELECT pid FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()',
          [`LISTEN ${channel}`],
        )
      ).rows.map((r) => r.pid);
    const next = async (gone?: number): Promise<number> => {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const pids = (await listening()).filter((p) => p !== gone);
        if (pids.length === 1) return pids[0]!;
        if (Date.now() > until) throw new Error(`no session listening on ${channel} after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    let pid = await next();
    for (let i = 0; i < times; i++) {
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      pid = await next(pid);
    }
  } finally {
    await admin.end();
  }
}
