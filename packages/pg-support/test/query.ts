import pg from 'pg';

/** Runs one statement on a fresh connection and returns its rows (or rejects with the driver's error). */
export async function query(connectionString: string, sql: string): Promise<unknown[]> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}
