import { OrchError } from '@orch/protocol';

/**
 * The store errors a request's values can cause, as API errors with a fixed message (never the
 * database's own text, which may quote the value or the schema): a data exception (SQLSTATE class
 * 22: invalid text, a value out of range or too long) and a program limit (class 54: an index row
 * too large) are `400 invalid_argument`; an integrity violation (class 23: a duplicate key) is
 * `409 conflict`. Input is validated before it reaches the store, so these are the backstop for a
 * value the schemas let through. Anything else is undefined (the caller decides).
 */
export function storeRefusal(err: unknown): OrchError | undefined {
  if (!(err instanceof Error)) return undefined;
  const { code, severity } = err as { code?: unknown; severity?: unknown };
  if (typeof severity !== 'string' || typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code))
    return undefined;
  const details = { sqlstate: code };
  if (code.startsWith('22'))
    return OrchError.invalid(`a value in the request cannot be stored (SQLSTATE ${code})`, details);
  if (code.startsWith('54'))
    return OrchError.invalid(`a value in the request is too large to store (SQLSTATE ${code})`, details);
  if (code.startsWith('23'))
    return OrchError.conflict(`the request conflicts with stored data (SQLSTATE ${code})`, details);
  return undefined;
}
