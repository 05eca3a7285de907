import { z } from 'zod';
import { cellSchema, rowSchema } from './cell.js';

/** Placeholder token names in query SQL: `{{name}}`, name 1 to 32 characters of `A-Za-z0-9_`. */
export const TOKEN_NAME_PATTERN = /^[A-Za-z0-9_]{1,32}$/;
/** Matches every `{{name}}` placeholder in a SQL string (global; reset `lastIndex` or use `matchAll`). */
export const PLACEHOLDER_PATTERN = /\{\{([^{}]*)\}\}/g;
/** The one entity a board has. */
export const ENTITY = 'items';

const idempotencyKey = z.string().min(1).max(200).optional();
/** Largest number of rows, patches or ids in one mutation. */
export const MAX_ROWS_PER_MUTATION = 10_000;
/** Largest SQL text accepted by `query.execute`, in characters. */
export const MAX_SQL_LENGTH = 100_000;
/** Largest page `changes.read` returns. */
export const MAX_CHANGES_PAGE = 1_000;

/** Input of `query.execute`. */
export const queryExecuteInput = z.strictObject({
  sql: z.string().min(1).max(MAX_SQL_LENGTH),
  tables: z
    .array(
      z.strictObject({
        token: z.string().regex(TOKEN_NAME_PATTERN, 'token names are 1 to 32 characters of A-Za-z0-9_'),
        entity: z.string(),
      }),
    )
    .max(32)
    .default([]),
  params: z.array(cellSchema).max(1000).default([]),
  minWatermark: z.number().int().nonnegative().optional(),
});

/** Input of `mutate.insert`. */
export const mutateInsertInput = z.strictObject({
  rows: z.array(rowSchema).min(1).max(MAX_ROWS_PER_MUTATION),
  idempotencyKey,
});

/** Input of `mutate.update`: single-row patches applied as one atomic write. */
export const mutateUpdateInput = z.strictObject({
  updates: z
    .array(z.strictObject({ id: z.string().min(1), patch: rowSchema }))
    .min(1)
    .max(MAX_ROWS_PER_MUTATION),
  idempotencyKey,
});

/** Input of `mutate.delete`. */
export const mutateDeleteInput = z.strictObject({
  ids: z.array(z.string().min(1)).min(1).max(MAX_ROWS_PER_MUTATION),
  idempotencyKey,
});

/** Input of `changes.read`: records with `seq > after`, at most `limit` of them. */
export const changesReadInput = z.strictObject({
  after: z.number().int().nonnegative(),
  limit: z.number().int().min(1).max(MAX_CHANGES_PAGE).default(100),
});

/** Input of `node.stats`: nothing (an empty object, or no body at all). */
export const nodeStatsInput = z.strictObject({});

/** Capability verbs. */
export const VERBS = ['read', 'write'] as const;
/** A capability verb. */
export type Verb = (typeof VERBS)[number];

/** Every procedure: its input schema and the verb a token needs on the board. */
export const PROCEDURES = {
  'query.execute': { input: queryExecuteInput, verb: 'read' },
  'mutate.insert': { input: mutateInsertInput, verb: 'write' },
  'mutate.update': { input: mutateUpdateInput, verb: 'write' },
  'mutate.delete': { input: mutateDeleteInput, verb: 'write' },
  'changes.read': { input: changesReadInput, verb: 'read' },
  'node.stats': { input: nodeStatsInput, verb: 'read' },
} as const satisfies Record<string, { input: z.ZodType; verb: Verb }>;

/** A procedure name. */
export type ProcedureName = keyof typeof PROCEDURES;
/** Input type of a procedure (after defaults are applied). */
export type ProcedureInput<P extends ProcedureName> = z.output<(typeof PROCEDURES)[P]['input']>;

/** True when `name` is a procedure of the contract. */
export function isProcedureName(name: string): name is ProcedureName {
  return Object.hasOwn(PROCEDURES, name);
}

/** Procedures a client may retry without an idempotency key (reads). */
export const IDEMPOTENT_PROCEDURES: readonly ProcedureName[] = [
  'query.execute',
  'changes.read',
  'node.stats',
];
