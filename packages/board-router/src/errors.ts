import { fail } from '@board/protocol';

/**
 * The router's own error tags, the one place they are mapped to HTTP statuses. They are answered
 * only when no node's answer can be relayed (envelope discipline: a node's answer, error or not,
 * is always relayed as it came).
 * - `NoNodeAvailable` (503): no node is up, or every node tried failed before answering (transport
 *   failure or 5xx) and the request was retryable. Safe to retry later.
 * - `NodeFailed` (502): a request that may not be re-sent (an unkeyed mutation) was sent to a node
 *   that failed before answering. It may or may not have been applied; the router did not re-send it.
 * - `RouterTimeout` (504): the request deadline passed before any node answered.
 * - `NotFound` (404): a path the router does not serve (the node's tag for the same case).
 * - `InvalidInput` (400): a request body the router could not buffer (over 64 MiB, or cut off).
 */
export const ROUTER_ERRORS = {
  NoNodeAvailable: 503,
  NodeFailed: 502,
  RouterTimeout: 504,
  NotFound: 404,
  InvalidInput: 400,
} as const;

/** A router error tag. */
export type RouterErrorTag = keyof typeof ROUTER_ERRORS;

/** Status and JSON body of a router error. */
export function routerError(tag: RouterErrorTag, message: string): { status: number; body: string } {
  return { status: ROUTER_ERRORS[tag], body: JSON.stringify(fail(tag, `board-router: ${message}`)) };
}
