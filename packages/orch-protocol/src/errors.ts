import { z } from 'zod';

/** The error codes of orchestrator.md ("Errors"). */
export const ERROR_CODES = [
  'not_found',
  'route_not_found',
  'unauthorized',
  'forbidden',
  'conflict',
  'invalid_argument',
  'unavailable',
  'internal',
  'unimplemented',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** `{ error: { code, message, details? } }`: the body of every error answer. */
export const ErrorBody = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES),
      message: z.string(),
      details: z.record(z.string(), z.unknown()).optional(),
    }),
  })
  .meta({ id: 'Error' });
export type ErrorBody = z.infer<typeof ErrorBody>;

/**
 * HTTP status of each code. The spec fixes 404, 403 and leaves the rest open; `unauthorized` is 401
 * for a missing or invalid caller token and 403 for a master-only refusal (the server picks).
 */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = {
  not_found: 404,
  route_not_found: 404,
  unauthorized: 401,
  forbidden: 403,
  conflict: 409,
  invalid_argument: 400,
  unavailable: 503,
  internal: 500,
  unimplemented: 501,
};
