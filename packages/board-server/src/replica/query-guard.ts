import { ENTITY, PLACEHOLDER_PATTERN, TOKEN_NAME_PATTERN } from '@board/protocol';
import { boardError } from '../errors.js';

/** Name of the board's table inside its replica. */
export const REPLICA_TABLE = 'items';

/**
 * Binds `{{token}}` placeholders to the board's table. Every token must be declared in `tables`
 * with entity `items` (tag `UnknownEntity` otherwise), every placeholder must be declared (tag
 * `UnknownPlaceholder`). The replacement is the fixed identifier `items`: no caller text is ever
 * spliced into SQL except the caller's own SQL.
 */
export function bindPlaceholders(sqlText: string, tables: { token: string; entity: string }[]): string {
  const declared = new Set<string>();
  for (const t of tables) {
    if (!TOKEN_NAME_PATTERN.test(t.token)) {
      throw boardError('InvalidInput', `token "${t.token}" must be 1 to 32 characters of A-Za-z0-9_`);
    }
    if (t.entity !== ENTITY) {
      throw boardError('UnknownEntity', `unknown entity "${t.entity}"; a board has one entity, "${ENTITY}"`);
    }
    declared.add(t.token);
  }
  return sqlText.replace(PLACEHOLDER_PATTERN, (_m, name: string) => {
    if (!TOKEN_NAME_PATTERN.test(name)) {
      throw boardError(
        'UnknownPlaceholder',
        `placeholder {{${name}}}: names are 1 to 32 characters of A-Za-z0-9_`,
      );
    }
    if (!declared.has(name)) {
      throw boardError('UnknownPlaceholder', `placeholder {{${name}}} is not bound in "tables"`);
    }
    return `"${REPLICA_TABLE}"`;
  });
}

/** Statements a read may start with (DuckDB also rewrites e.g. PRAGMA and SHOW into SELECTs). */
const READ_KEYWORDS = new Set(['SELECT', 'WITH', 'FROM', 'VALUES', 'TABLE']);

/**
 * The first keyword of a statement, skipping whitespace, comments and opening parentheses.
 * @example leadingKeyword('/* x *\/ (select 1)') // 'SELECT'
 */
export function leadingKeyword(sqlText: string): string {
  let i = 0;
  for (;;) {
    const rest = sqlText.slice(i);
    const ws = /^[\s(]+/.exec(rest);
    if (ws) {
      i += ws[0].length;
      continue;
    }
    if (rest.startsWith('--')) {
      const nl = rest.indexOf('\n');
      i = nl < 0 ? sqlText.length : i + nl + 1;
      continue;
    }
    if (rest.startsWith('/*')) {
      const end = rest.indexOf('*/', 2);
      i = end < 0 ? sqlText.length : i + end + 2;
      continue;
    }
    return (/^[A-Za-z_]+/.exec(rest)?.[0] ?? '').toUpperCase();
  }
}

/** True when the statement starts like a read (`SELECT`, `WITH`, `FROM`, `VALUES`, `TABLE`). */
export function isReadStatement(sqlText: string): boolean {
  return READ_KEYWORDS.has(leadingKeyword(sqlText));
}
