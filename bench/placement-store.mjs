// How placement decisions should take the store, measured on the store alone (issue 31): a burst of
// creates fired at once over R "replicas" (R pg pools of 10 connections, as R orchds would hold),
// against H hosts of 4 CPUs, each create asking for 1 CPU. The designs, side by side in one run:
//
//   lock-per-create   today's: every create opens a transaction, takes the cluster-wide advisory
//                     lock, reads the hosts (on another pooled connection, as HostService.list
//                     does) and the active environments, inserts; a waiting create holds a connection
//   queue+lock        an in-process queue per replica in front of the same lock: one create at a
//                     time per replica, the hosts read inside the transaction
//   queue+lock batch  the same queue, every waiting create of a replica placed in one transaction
//   queue+host lock   the same queue; the replica reads hosts and usage once per batch and inserts
//                     each environment in one statement, which a trigger checks under a row lock on
//                     the chosen host only (refused: the view is read again and the create retried)
//   queue+host lock batch  the same, but a replica's waiting creates go in one multi-row INSERT (rows
//                     sorted by host, so two replicas take host locks in the same order); a refusal
//                     fails the statement, the view is read again and the batch placed again
//   queue+locked hosts batch  the same queue; a batch reads the view without a lock, picks its
//                     hosts, locks only those host rows (sorted: no deadlock), reads their usage
//                     again under the lock and places within them (what no longer fits there goes
//                     back to the queue while other hosts may have room), inserts, commits
//
// Each run prints decisions per second (all creates answered), what was placed against what fits,
// store errors, and whether any host was overbooked. The schema is a minimal copy of orchd's (CPUs
// only); the trigger is the one of migration 0011_burst_placement reduced to CPUs.
//
//   node bench/placement-store.mjs [replicas=3]
import { TestPostgres } from '@support/pg/test-server';
import pg from 'pg';

const REPLICAS = Number(process.argv[2] ?? 3);
const CASES = [
  { hosts: 4, creates: 100 },
  { hosts: 50, creates: 100 },
  { hosts: 4, creates: 1000 },
  { hosts: 50, creates: 1000 },
];
const DESIGNS = [
  'lock-per-create',
  'queue+lock',
  'queue+lock batch',
  'queue+host lock',
  'queue+host lock batch',
  'queue+locked hosts batch',
];

const server = await TestPostgres.start({ fsync: 'on', max_connections: '200' });
try {
  const url = await server.createDatabase('placement');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`
    CREATE TABLE hosts (id text PRIMARY KEY, cpus int NOT NULL, state text NOT NULL DEFAULT 'active');
    CREATE TABLE environments (id text PRIMARY KEY, host_id text NOT NULL, cpus int NOT NULL, state text NOT NULL);
    CREATE INDEX environments_host_state ON environments (host_id, state);
    CREATE FUNCTION hold_capacity() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE cap int; used int;
    BEGIN
      SELECT cpus INTO cap FROM hosts WHERE id = NEW.host_id FOR NO KEY UPDATE;
      SELECT coalesce(sum(cpus), 0) INTO used FROM environments
        WHERE host_id = NEW.host_id AND state IN ('creating', 'running') AND id <> NEW.id;
      IF used + NEW.cpus > cap THEN
        RAISE EXCEPTION USING ERRCODE = 'OC001', MESSAGE = format('host %s has %s of %s cpus free', NEW.host_id, cap - used, NEW.cpus);
      END IF;
      RETURN NEW;
    END $$;
  `);
  console.log(
    `placement on the store alone: ${REPLICAS} replicas (pools of 10), hosts of 4 CPUs, creates of 1 CPU fired at once`,
  );
  console.log(
    '| hosts | creates | design | decisions/s | placed / fit | store errors | overbooked | vs lock-per-create |',
  );
  console.log(
    '| ----: | ------: | ------ | ----------: | -----------: | -----------: | ---------: | -----------------: |',
  );
  for (const c of CASES) {
    let baseline;
    for (const design of DESIGNS) {
      await admin.query('DROP TRIGGER IF EXISTS hold ON environments; TRUNCATE environments, hosts');
      if (design.startsWith('queue+host lock'))
        await admin.query(
          'CREATE TRIGGER hold BEFORE INSERT ON environments FOR EACH ROW EXECUTE FUNCTION hold_capacity()',
        );
      await admin.query(
        `INSERT INTO hosts SELECT 'h' || lpad(i::text, 3, '0'), 4 FROM generate_series(1, ${c.hosts}) i`,
      );
      const r = await burst(url, design, c.creates);
      const over = (
        await admin.query(
          `SELECT count(*)::int AS n FROM (SELECT h.id FROM hosts h JOIN environments e ON e.host_id = h.id GROUP BY h.id, h.cpus HAVING sum(e.cpus) > h.cpus) x`,
        )
      ).rows[0].n;
      const rate = c.creates / r.seconds;
      if (design === 'lock-per-create') baseline = rate;
      console.log(
        `| ${c.hosts} | ${c.creates} | ${design} | ${rate.toFixed(0)} | ${r.placed} / ${Math.min(c.creates, 4 * c.hosts)} | ${r.errors} | ${over} hosts | ${(rate / baseline).toFixed(1)}x |`,
      );
    }
  }
  await admin.end();
} finally {
  await server.destroy();
}

/** Fires `creates` at once over the replicas; resolves when every one is answered. */
async function burst(url, design, creates) {
  const pools = Array.from(
    { length: REPLICAS },
    () => new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 3000 }),
  );
  const replicas = pools.map((pool) => replica(pool, design));
  let placed = 0;
  let errors = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: creates }, (_, i) =>
      replicas[i % REPLICAS](`env_${i}`).then(
        (ok) => {
          if (ok) placed++;
        },
        () => errors++,
      ),
    ),
  );
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(pools.map((p) => p.end()));
  return { seconds, placed, errors };
}

/** The best host: most CPUs free (ties by id), or undefined when none has one. */
function choose(hosts, used) {
  let best;
  for (const h of hosts) {
    const free = h.cpus - (used.get(h.id) ?? 0);
    if (free >= 1 && (!best || free > best.free)) best = { id: h.id, free };
  }
  return best?.id;
}

async function readView(q) {
  const hosts = (await q.query('SELECT id, cpus FROM hosts ORDER BY id')).rows;
  const rows = (
    await q.query(
      `SELECT host_id, sum(cpus)::int AS cpus FROM environments WHERE state IN ('creating', 'running') GROUP BY host_id`,
    )
  ).rows;
  return { hosts, used: new Map(rows.map((r) => [r.host_id, r.cpus])) };
}

/** A replica's create function for `design`: resolves true (placed) or false (no capacity). */
function replica(pool, design) {
  const underLock = async (client, ids) => {
    await client.query('BEGIN');
    try {
      await client.query(`SELECT pg_advisory_xact_lock(hashtext('orchd:placement'))`);
      const { hosts, used } = await readView(design === 'lock-per-create' ? pool : client);
      const out = [];
      for (const id of ids) {
        const host = choose(hosts, used);
        if (host) {
          await client.query(`INSERT INTO environments VALUES ($1, $2, 1, 'creating')`, [id, host]);
          used.set(host, (used.get(host) ?? 0) + 1);
        }
        out.push(host !== undefined);
      }
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  };
  if (design === 'lock-per-create') {
    return async (id) => {
      const client = await pool.connect();
      try {
        return (await underLock(client, [id]))[0];
      } finally {
        client.release();
      }
    };
  }
  // An in-process queue: waiting costs no connection; one worker per replica.
  const queue = [];
  let running = false;
  const work = async () => {
    running = true;
    while (queue.length > 0) {
      const batch = queue.splice(0, design === 'queue+lock' ? 1 : 256);
      try {
        if (design.startsWith('queue+host lock')) {
          let view = await readView(pool);
          for (const p of batch) {
            for (let attempt = 0; ; attempt++) {
              const host = choose(view.hosts, view.used);
              if (!host) {
                p.resolve(false);
                break;
              }
              try {
                await pool.query(`INSERT INTO environments VALUES ($1, $2, 1, 'creating')`, [p.id, host]);
                view.used.set(host, (view.used.get(host) ?? 0) + 1);
                p.resolve(true);
                break;
              } catch (err) {
                if (err.code !== 'OC001' || attempt >= 20) throw err;
                view = await readView(pool);
              }
            }
          }
        } else {
          const client = await pool.connect();
          try {
            const out = await underLock(
              client,
              batch.map((p) => p.id),
            );
            for (const [i, p] of batch.entries()) p.resolve(out[i]);
          } finally {
            client.release();
          }
        }
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
    running = false;
  };
  return (id) =>
    new Promise((resolve, reject) => {
      queue.push({ id, resolve, reject });
      if (!running) void work();
    });
}
