import type { Cell, ColumnDef } from '@board/protocol';
import { REPLICA_TABLE } from './query-guard.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Node = { [key: string]: Json };

/** A key column's kind: the only parameter values a batch binds for it. */
export type KeyKind = 'text' | 'integer';

/** Name of the column a batch adds in front of the statement's own: the row's key. */
const KEY_COLUMN = '__board_key';

/**
 * A point lookup: `SELECT <columns or *> FROM items [alias] WHERE <column> = $1` with nothing else
 * (no ORDER BY, LIMIT, DISTINCT, GROUP BY, CTE, join or expression), keyed by a text or integer
 * column. Several such queries with different keys can run as one DuckDB statement,
 * `SELECT <column> AS __board_key, <columns or *> FROM items [alias] WHERE <column> IN ($1, ..., $k)`,
 * and each gets exactly the rows whose key equals its own: for a text or integer column and a
 * parameter of the same kind, `=` is plain equality of values, so the rows that match key `v` in the
 * batch are the rows `column = v` matches alone, in the same (table) order.
 */
export interface KeyedLookup {
  kind: KeyKind;
  /** The key column's name as written (DuckDB resolves it case-insensitively). */
  key: string;
  /** The select list: `*` (the table's columns in order) or one column by name, as written. */
  select: ({ star: true } | { star: false; column: string })[];
  /** The batched statement for `k` keys (parameters `$1` to `$k`). */
  sql(k: number): string;
}

/**
 * The kind of the board column `name` as DuckDB resolves identifiers (case-insensitively), when it
 * can key a batch: `id` and `state` are text, TEXT columns text, INTEGER columns integer.
 */
export function keyKind(columns: ColumnDef[], name: string): KeyKind | undefined {
  const n = name.toLowerCase();
  if (n === 'id' || n === 'state') return 'text';
  const type = columns.find((c) => c.name.toLowerCase() === n)?.type;
  if (type === 'TEXT') return 'text';
  if (type === 'INTEGER') return 'integer';
  return undefined;
}

/** True when `params` (a query's) can be one key of a batch of `lookup`. */
export function batchableKey(lookup: KeyedLookup, params: Cell[]): boolean {
  if (params.length !== 1) return false;
  const v = params[0];
  return lookup.kind === 'text' ? typeof v === 'string' : Number.isSafeInteger(v);
}

/**
 * The statement's batched form, from its DuckDB parse tree (`json_serialize_sql`'s `statements`),
 * or undefined when it is not a plain point lookup. `kindOf` gives a column's key kind.
 */
export function keyedLookup(
  statements: Json,
  kindOf: (column: string) => KeyKind | undefined,
): KeyedLookup | undefined {
  if (!Array.isArray(statements) || statements.length !== 1) return undefined;
  const statement = statements[0] as Node;
  const params = statement.named_param_map;
  if (!Array.isArray(params) || params.length !== 1) return undefined;
  const node = statement.node as Node | null;
  if (node?.type !== 'SELECT_NODE' || !isEmpty(node.modifiers)) return undefined;
  if (!isEmpty((node.cte_map as Node | null)?.map) || !isEmpty(node.group_expressions)) return undefined;
  if (!isEmpty(node.group_sets) || node.having !== null || node.sample !== null) return undefined;
  if (node.qualify !== null || node.aggregate_handling !== 'STANDARD_HANDLING') return undefined;

  const from = node.from_table as Node | null;
  if (from?.type !== 'BASE_TABLE' || lower(from.table_name) !== REPLICA_TABLE) return undefined;
  if (from.schema_name !== '' || from.catalog_name !== '' || from.sample !== null) return undefined;
  if (from.at_clause !== null || !isEmpty(from.column_name_alias)) return undefined;
  const alias = typeof from.alias === 'string' ? from.alias : '';
  const table = alias === '' ? REPLICA_TABLE : alias;

  const where = node.where_clause as Node | null;
  if (where?.class !== 'COMPARISON' || where.type !== 'COMPARE_EQUAL') return undefined;
  const left = where.left as Node;
  const right = where.right as Node;
  const [column, param] = left?.class === 'COLUMN_REF' ? [left, right] : [right, left];
  if (param?.class !== 'PARAMETER' || param.type !== 'VALUE_PARAMETER') return undefined;
  const key = columnRef(column, table);
  if (!key || column?.alias !== '') return undefined;
  const kind = kindOf(key.name);
  if (!kind) return undefined;

  const list: string[] = [];
  const select: KeyedLookup['select'] = [];
  if (!Array.isArray(node.select_list) || node.select_list.length === 0) return undefined;
  for (const item of node.select_list as Node[]) {
    const rendered = selectItem(item, table);
    if (rendered === undefined) return undefined;
    list.push(rendered);
    select.push(
      item.class === 'STAR' ? { star: true } : { star: false, column: columnRef(item, table)!.name },
    );
  }
  const fromSql = alias === '' ? `"${REPLICA_TABLE}"` : `"${REPLICA_TABLE}" AS ${quote(alias)}`;
  return {
    kind,
    key: key.name,
    select,
    sql: (k) =>
      `SELECT ${key.sql} AS "${KEY_COLUMN}", ${list.join(', ')} FROM ${fromSql} WHERE ${key.sql} IN (${Array.from(
        { length: k },
        (_v, i) => `$${i + 1}`,
      ).join(', ')})`,
  };
}

/** A column of the one table, as written (`col` or `table.col`), quoted, with its name. */
function columnRef(node: Node | undefined, table: string): { sql: string; name: string } | undefined {
  if (node?.class !== 'COLUMN_REF') return undefined;
  const names = node.column_names;
  if (!Array.isArray(names) || !names.every((n) => typeof n === 'string')) return undefined;
  const parts = names as string[];
  if (parts.length === 1) return { sql: quote(parts[0]!), name: parts[0]! };
  if (parts.length === 2 && parts[0]!.toLowerCase() === table.toLowerCase()) {
    return { sql: `${quote(parts[0]!)}.${quote(parts[1]!)}`, name: parts[1]! };
  }
  return undefined;
}

/** `*` or a column (with its alias), rendered; undefined for anything else. */
function selectItem(item: Node, table: string): string | undefined {
  if (item.class === 'STAR') {
    const relation = typeof item.relation_name === 'string' ? item.relation_name : '';
    if (relation !== '' && relation.toLowerCase() !== table.toLowerCase()) return undefined;
    if (item.columns !== false || item.expr !== null || item.alias !== '') return undefined;
    for (const k of ['exclude_list', 'replace_list', 'rename_list', 'qualified_exclude_list']) {
      if (!isEmpty(item[k])) return undefined;
    }
    return relation === '' ? '*' : `${quote(relation)}.*`;
  }
  const ref = columnRef(item, table);
  if (!ref) return undefined;
  const alias = typeof item.alias === 'string' ? item.alias : '';
  return alias === '' ? ref.sql : `${ref.sql} AS ${quote(alias)}`;
}

const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;
const lower = (v: Json | undefined): string => (typeof v === 'string' ? v.toLowerCase() : '');
const isEmpty = (v: Json | undefined): boolean => Array.isArray(v) && v.length === 0;
