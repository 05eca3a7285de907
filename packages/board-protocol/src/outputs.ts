import { z } from 'zod';
import type { ChangesPage, MutateAck, QueryOutcome } from './changes.js';
import type { ProcedureName } from './procedures.js';

/**
 * `node.stats` value: the node id and its boards, plus engine counters (their fields are the
 * node's, see `@board/server`'s README; a client treats them as opaque).
 */
export interface NodeStats {
  nodeId: string;
  boards: string[];
  [field: string]: unknown;
}

/** The `value` of a successful answer, per procedure. */
export interface ProcedureOutputs {
  'query.execute': QueryOutcome;
  'mutate.insert': MutateAck;
  'mutate.update': MutateAck;
  'mutate.delete': MutateAck;
  'changes.read': ChangesPage;
  'node.stats': NodeStats;
}

/**
 * Output (`value`) type of a procedure.
 *
 * @example
 * const v: ProcedureOutput<'mutate.insert'> = { watermark: 3 };
 */
export type ProcedureOutput<P extends ProcedureName> = ProcedureOutputs[P];

/**
 * `GET /health` body. A node answers `{ ok: true, nodeId }` (no auth, no engine work); a router
 * answers `{ ok, nodeId: 'board-router', nodes: [{ url, nodeId, state }] }` with status 503 and
 * `ok: false` when no node is up.
 */
export const healthSchema = z.object({
  ok: z.boolean(),
  nodeId: z.string().min(1),
  /** The program's version (its package.json), on board-node and board-router. */
  version: z.string().optional(),
  nodes: z
    .array(z.object({ url: z.string(), nodeId: z.string(), state: z.enum(['unknown', 'up', 'down']) }))
    .optional(),
});

/** `GET /health` body (see {@link healthSchema}). */
export type Health = z.infer<typeof healthSchema>;
