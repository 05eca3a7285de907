import { BoardError, ERROR_TAGS } from '@board/protocol';

/**
 * The tags the router answers itself, from `@board/protocol`'s `ERROR_TAGS` (the one table of tags
 * and statuses). They are answered only when no node's answer can be relayed (envelope
 * discipline: a node's answer, error or not, is always relayed as it came).
 * - `NoNodeAvailable` (503): no node is up, or every node tried failed before answering (transport
 *   failure or 5xx) and the request was retryable. Safe to retry later.
 * - `NodeFailed` (502): a request that may not be re-sent (an unkeyed mutation) was sent to a node
 *   that failed before answering. It may or may not have been applied; the router did not re-send it.
 * - `RouterTimeout` (504): the request deadline passed before any node answered.
 * - `NotFound` (404): a path the router does not serve (the node's tag for the same case).
 * - `InvalidInput` (400): a request body the router could not buffer (over 64 MiB, or cut off).
 */
export const ROUTER_TAGS = [
  'NoNodeAvailable',
  'NodeFailed',
  'RouterTimeout',
  'NotFound',
  'InvalidInput',
] as const;

/** A tag the router answers itself. */
export type RouterErrorTag = (typeof ROUTER_TAGS)[number];

/** Status and JSON body of a router error: the one place router errors meet HTTP. */
export function routerError(tag: RouterErrorTag, message: string): { status: number; body: string } {
  const error = new BoardError(tag, `board-router: ${message}`);
  return { status: ERROR_TAGS[tag], body: JSON.stringify({ status: 'error', error: error.toWire() }) };
}
