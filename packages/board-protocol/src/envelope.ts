import { z } from 'zod';

/** The body of a failure. */
export interface WireError {
  _tag: string;
  message: string;
}

/** What every `/rpc` response body is. */
export type WireEnvelope<T = unknown> = { status: 'ok'; value: T } | { status: 'error'; error: WireError };

/** Builds a success envelope. */
export function ok<T>(value: T): WireEnvelope<T> {
  return { status: 'ok', value };
}

/** Builds a failure envelope. */
export function fail(tag: string, message: string): WireEnvelope<never> {
  return { status: 'error', error: { _tag: tag, message } };
}

/** Zod schema of a {@link WireEnvelope} (value unchecked). */
export const wireEnvelopeSchema = z.discriminatedUnion('status', [
  z.object({ status: z.literal('ok'), value: z.unknown() }),
  z.object({ status: z.literal('error'), error: z.object({ _tag: z.string(), message: z.string() }) }),
]);
