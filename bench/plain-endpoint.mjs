// The peer of bench/board.mjs (issue 18): what a user would otherwise deploy for HTTP reads on the
// same data ("PostgREST class"): a bare node:http server with a pg pool, running the same SQL on the
// board's own Postgres table. Same wire shape as board-node for the two procedures benchmarked:
//   POST /rpc/query.execute  { sql, params }   ({{t}} is replaced by the table named in x-plain-table)
//   POST /rpc/mutate.insert  { rows }          (id, state, title, n into x-plain-table)
// Usage (spawned by bench/board.mjs): DATABASE_URL=... node bench/plain-endpoint.mjs  -> prints its URL
import { createServer } from 'node:http';
import pg from 'pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 20 });
const TABLE = /^[a-z_][a-z0-9_]{0,62}$/;

function answer(res, body) {
  const text = JSON.stringify(body);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const server = createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  try {
    const table = String(req.headers['x-plain-table'] ?? '');
    if (!TABLE.test(table)) throw new Error('bad table');
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    if (req.url === '/rpc/query.execute') {
      const r = await pool.query({
        text: String(body.sql).replaceAll('{{t}}', table),
        values: body.params ?? [],
        rowMode: 'array',
      });
      answer(res, {
        status: 'ok',
        value: { result: { columns: r.fields.map((f) => f.name), rows: r.rows } },
      });
    } else if (req.url === '/rpc/mutate.insert') {
      const rows = body.rows;
      const values = [];
      const tuples = rows.map((row, i) => {
        values.push(row.id, row.state ?? null, row.title ?? null, row.n ?? null);
        return `($${4 * i + 1}, now(), $${4 * i + 2}, $${4 * i + 3}, $${4 * i + 4})`;
      });
      await pool.query(
        `INSERT INTO ${table} (id, updated_at, state, title, n) VALUES ${tuples.join(', ')}`,
        values,
      );
      answer(res, { status: 'ok', value: { count: rows.length } });
    } else {
      answer(res, { status: 'error', error: { _tag: 'UnknownProcedure', message: req.url } });
    }
  } catch (err) {
    answer(res, { status: 'error', error: { _tag: 'Failed', message: String(err?.message ?? err) } });
  }
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
process.on('SIGTERM', () => {
  server.close();
  void pool.end().then(() => process.exit(0));
});
