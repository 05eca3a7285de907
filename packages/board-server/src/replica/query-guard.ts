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
