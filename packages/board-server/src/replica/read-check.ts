import { type DuckDBConnection, type DuckDBPreparedStatement, StatementType } from '@duckdb/node-api';
import { boardError } from '../errors.js';
import type { keyedLookup } from './keyed-lookup.js';
import type { parseTreeJson } from './parse-tree.js';
import { isReadStatement } from './query-guard.js';
import { checkSources } from './source-guard.js';

/** DuckDB's parse tree of a SQL text (`json_serialize_sql`), or its parser's error. */
export type ParseTree = ReturnType<typeof parseTreeJson>;
/** The statements of a parse tree that passed the checks. */
export type CheckedStatements = Parameters<typeof keyedLookup>[0];

/**
 * Checks `sqlText` as a read and prepares it on `conn`: exactly one statement, starting like a read
 * (`query-guard.ts`), reading only the board's table (`source-guard.ts`), and a SELECT once
 * prepared; else `QueryRefused` (a text DuckDB cannot parse: `QueryFailed`). The source check runs
 * on the parse tree (`parseTree`) before the statement is bound, so that nothing (not even an error
 * message of the binder or optimizer) is computed from a source the query may not read. Returns
 * the prepared statement and the parsed statements.
 */
export async function prepareCheckedRead(
  conn: DuckDBConnection,
  sqlText: string,
  parseTree: (sqlText: string) => Promise<ParseTree>,
): Promise<{ prepared: DuckDBPreparedStatement; statements: CheckedStatements }> {
  let extracted: Awaited<ReturnType<DuckDBConnection['extractStatements']>>;
  try {
    extracted = await conn.extractStatements(sqlText);
  } catch (err) {
    // DuckDB's extraction fails without a message ("Error in native callback") on a text with
    // no statement at all (blank, only comments or semicolons); its parser says how many there are.
    if ((await parseTree(sqlText)).statements?.length === 0) {
      throw boardError('QueryRefused', 'exactly one statement is allowed, got 0');
    }
    throw err;
  }
  if (extracted.count !== 1) {
    throw boardError('QueryRefused', `exactly one statement is allowed, got ${extracted.count}`);
  }
  // Both checks: the leading keyword (DuckDB turns PRAGMA, SHOW and DESCRIBE into SELECT
  // statements, which must not pass as reads) and, below, the parsed statement type.
  if (!isReadStatement(sqlText)) {
    throw boardError('QueryRefused', 'only SELECT statements are allowed on the read path');
  }
  const statements = await checkParseTree(sqlText, parseTree);
  const prepared = await extracted.prepare(0);
  if (prepared.statementType !== StatementType.SELECT) {
    prepared.destroySync();
    throw boardError('QueryRefused', 'only SELECT statements are allowed on the read path');
  }
  return { prepared, statements };
}

/**
 * Parses `sqlText` with DuckDB's own parser (`json_serialize_sql`) and checks its sources; returns
 * the parsed statements.
 */
async function checkParseTree(
  sqlText: string,
  parseTree: (sqlText: string) => Promise<ParseTree>,
): Promise<CheckedStatements> {
  const tree = await parseTree(sqlText);
  if (tree.error) {
    throw boardError('QueryFailed', `Parser Error: ${tree.error_message ?? 'the query could not be parsed'}`);
  }
  const statements = (tree.statements ?? null) as Parameters<typeof checkSources>[0];
  checkSources(statements);
  return statements;
}
