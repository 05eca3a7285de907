import { boardError } from '../errors.js';
import { REPLICA_TABLE } from './query-guard.js';

/**
 * Table functions a query may call: generators over values, nothing that reads a catalog, a
 * setting, a file or runs SQL text (`query`, `query_table`, `json_execute_serialized_sql`).
 */
const ALLOWED_TABLE_FUNCTIONS = new Set([
  'range',
  'generate_series',
  'unnest',
  'json_each',
  'json_tree',
  'repeat',
  'repeat_row',
]);

/**
 * Scalar functions (and built-in macros) that read settings, variables or catalogs: the host's
 * paths show there (`current_setting('temp_directory')`, the database file of
 * `duckdb_databases()` behind `pg_get_viewdef` and friends).
 */
const REFUSED_FUNCTIONS = new Set([
  'current_setting',
  'getvariable',
  'getenv',
  'pg_get_constraintdef',
  'pg_get_viewdef',
  'format_type',
  'get_block_size',
  'json_execute_serialized_sql',
]);

/**
 * Kinds of table reference (a `FROM` item) the guard understands: the board's table and CTEs
 * (`BASE_TABLE`, checked), the table functions above (`TABLE_FUNCTION`, checked), and those whose
 * sources are all inside them (subqueries, joins, `VALUES`, no `FROM`, `PIVOT`/`UNPIVOT` over a
 * source). Any other kind is refused: `SHOW_REF` (`(SHOW TABLES)`, `(DESCRIBE t)`, `(SUMMARIZE t)`
 * read DuckDB's catalog), and whatever a later DuckDB adds.
 */
const ALLOWED_TABLE_REFS = new Set([
  'BASE_TABLE',
  'TABLE_FUNCTION',
  'SUBQUERY',
  'JOIN',
  'EXPRESSION_LIST',
  'EMPTY',
  'PIVOT',
]);

/** Kinds of query node the guard understands (any other is refused). */
const ALLOWED_QUERY_NODES = new Set(['SELECT_NODE', 'SET_OPERATION_NODE', 'RECURSIVE_CTE_NODE', 'CTE_NODE']);

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const lower = (v: Json | undefined): string => (typeof v === 'string' ? v.toLowerCase() : '');

/**
 * Checks what a read may touch, on DuckDB's own parse tree (`json_serialize_sql`), before the
 * statement is bound: a query reads its board's table (`items`, what `{{token}}` placeholders
 * become), its own CTEs in scope, and the table functions above, and calls no function that reads
 * settings or catalogs. Everything else (other tables, DuckDB's catalog views and `duckdb_*()`
 * functions, `pragma_*`, files as tables, SQL run from text) is `QueryRefused`. This is what keeps
 * the replica's file path and the node's directories (`duckdb_databases()`,
 * `current_setting('temp_directory')`, `duckdb_settings()`, `query(...)`) out of answers.
 *
 * CTE scope follows the binder, conservatively: a CTE's body sees the CTEs declared before it (and
 * itself when recursive); the rest of the query sees them all.
 */
export function checkSources(tree: Json): void {
  walk(tree, new Set());
}

function walk(node: Json, scope: ReadonlySet<string>): void {
  if (Array.isArray(node)) {
    for (const item of node) walk(item, scope);
    return;
  }
  if (node === null || typeof node !== 'object') return;
  let inScope = scope;
  const ctes = (node.cte_map as { map?: Json } | undefined)?.map;
  if (Array.isArray(ctes) && ctes.length > 0) {
    const growing = new Set(scope);
    for (const entry of ctes) {
      const e = entry as { key?: Json; value?: Json };
      walk(e.value ?? null, new Set(growing));
      growing.add(lower(e.key));
    }
    inScope = growing;
  }
  checkKind(node);
  if (node.type === 'RECURSIVE_CTE_NODE') inScope = new Set([...inScope, lower(node.cte_name)]);
  if (node.type === 'BASE_TABLE') checkTable(node, inScope);
  if (node.type === 'TABLE_FUNCTION') {
    const name = lower((node.function as { function_name?: Json } | null)?.function_name);
    if (!ALLOWED_TABLE_FUNCTIONS.has(name)) {
      throw boardError(
        'QueryRefused',
        `table function ${name}() is not allowed; a query reads its board's table and values (${[...ALLOWED_TABLE_FUNCTIONS].join(', ')})`,
      );
    }
  }
  if (node.class === 'FUNCTION' && REFUSED_FUNCTIONS.has(lower(node.function_name))) {
    throw boardError(
      'QueryRefused',
      `function ${lower(node.function_name)}() is not allowed: it reads settings or catalogs`,
    );
  }
  for (const [key, child] of Object.entries(node)) {
    if (key !== 'cte_map') walk(child, inScope);
  }
}

/**
 * Refuses a table reference or query node of a kind not in the allow-lists. In DuckDB's serialized
 * tree a table reference is an object with `type`, `alias` and `sample` (expressions carry `class`
 * instead; query nodes carry `modifiers`), a query node one with `type` and `modifiers`.
 */
function checkKind(node: { [key: string]: Json }): void {
  if (typeof node.type !== 'string' || 'class' in node) return;
  if ('modifiers' in node) {
    if (!ALLOWED_QUERY_NODES.has(node.type)) {
      throw boardError('QueryRefused', `a query of kind ${node.type} is not allowed on the read path`);
    }
  } else if ('alias' in node && 'sample' in node && !ALLOWED_TABLE_REFS.has(node.type)) {
    throw boardError(
      'QueryRefused',
      node.type === 'SHOW_REF'
        ? "SHOW, DESCRIBE and SUMMARIZE are not allowed: a query reads only its board's table (through a {{placeholder}}) and its own CTEs"
        : `a FROM item of kind ${node.type} is not allowed on the read path`,
    );
  }
}

function checkTable(node: { [key: string]: Json }, scope: ReadonlySet<string>): void {
  const name = lower(node.table_name);
  const schema = lower(node.schema_name);
  const catalog = lower(node.catalog_name);
  if (catalog === '' && schema === '' && scope.has(name)) return;
  if (name === REPLICA_TABLE && catalog === '' && (schema === '' || schema === 'main')) return;
  const shown = [catalog, schema, name].filter((p) => p !== '').join('.');
  throw boardError(
    'QueryRefused',
    `table ${JSON.stringify(shown.slice(0, 100))} is not readable: a query reads only its board's table (through a {{placeholder}}) and its own CTEs`,
  );
}
