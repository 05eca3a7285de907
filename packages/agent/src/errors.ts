import { OrchError } from '@orch/protocol';

/**
 * The agent's errors are the protocol's one error class ({@link OrchError} of `@orch/protocol`:
 * stable code, HTTP status as data, structured non-sensitive details, and the helpers `invalid`,
 * `notFound`, `conflict`, `unavailable`, `diskFull`, `missingTool`). `AgentError` is that class
 * under the agent's name, so that `instanceof` checks anywhere (orchd, the CLI) see the same
 * hierarchy. Mapped to HTTP in exactly one place: `api/app.ts`.
 */
export const AgentError = OrchError;
export type AgentError = OrchError;

/** True for the errno of a full disk. */
export function isDiskFull(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT' || /No space left on device/i.test(String(err));
}
