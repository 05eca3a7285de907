import { OrchError } from '@orch/protocol';
import { isStoreUnavailable } from '@support/pg';
import { storeRefusal } from '../store/store-errors.js';

/**
 * Maps anything thrown inside orchd to the wire error, the one mapping of this server (used by the
 * API's `onError` and by the console upgrade, which answers before Hono sees the request):
 * an {@link OrchError} as it is (agent failures are {@link OrchError}s that keep the agent's code and
 * details); malformed percent-encoding → `400 invalid_argument`; a store outage → `503
 * unavailable`; a value the store refuses → `400`/`409` (see `storeRefusal`); anything else → `500
 * internal` with a fixed message (the details go to the log, never to the client).
 */
export function toOrchError(err: unknown): OrchError {
  if (err instanceof OrchError) return err;
  if (err instanceof URIError) return OrchError.invalid('the URL has malformed percent-encoding');
  if (isStoreUnavailable(err))
    return OrchError.unavailable("the orchestrator's store is unavailable; try again shortly");
  return storeRefusal(err) ?? new OrchError('internal', 'internal error');
}

/** An HTTP/1.1 answer written straight to a socket (for refusals before an upgrade), in the envelope. */
export function rawErrorResponse(error: OrchError): string {
  const body = JSON.stringify(error.toBody());
  const extra = Object.entries(error.headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `HTTP/1.1 ${error.status} ${error.code}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}connection: close\r\n\r\n${body}`;
}
