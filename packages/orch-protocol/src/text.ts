import { z } from 'zod';
import { base64Problem } from './base64.js';
import { AGENT_ID, ID_RULES } from './ids.js';
import { identifierProblem, MAX_TASK_ID, SECRET_NAME, SECRET_NAME_RULE, textProblem } from './rules.js';

export {
  checkIdentifier,
  cleanText,
  identifierProblem,
  MAX_TASK_ID,
  SECRET_NAME,
  SECRET_NAME_RULE,
  textProblem,
  VM_SECRET_NAME,
} from './rules.js';

/**
 * A string field under the text rule, at most `max` characters (and at least `min`).
 *
 * @example
 * z.strictObject({ label: text(200, 1) }) // refuses "", "a\u0000b", "\ud800" and 201 characters
 */
export function text(max: number, min = 0) {
  let s = z.string().max(max);
  if (min > 0) s = s.min(min);
  return s.check((ctx) => {
    const problem = textProblem(ctx.value);
    if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
  });
}

/**
 * A string field holding canonical base64 ({@link base64Problem}: standard alphabet, padded, no
 * whitespace or line breaks), at most `max` characters (and at least `min`). A base64 string keeps
 * the text rule by construction.
 *
 * @example z.strictObject({ manifest_inline: base64Text(512 * 1024, 1) }) // refuses "e30=\n", "e30", "e3-="
 */
export function base64Text(max: number, min = 0) {
  let s = z.string().max(max);
  if (min > 0) s = s.min(min);
  return s.check((ctx) => {
    const problem = base64Problem(ctx.value);
    if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
  });
}

/**
 * Ids chosen by the orchestrator (environments = VM ids, snapshots, API keys) are `AGENT_ID`s
 * (ids.ts): what the agent accepts for VM and snapshot ids, so no id names a path outside the
 * agent's data directory. This is the rule in words.
 */
export const AGENT_ID_RULE = ID_RULES.agentId;

/** Host ids: what an agent reports, or what the operator chooses at registration. */
export const HOST_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
export const HOST_ID_RULE = '1-63 letters, digits, ".", "_" or "-", starting with a letter or digit';

/** A field holding a task id ({@link identifierProblem}). */
export const taskId = () =>
  z
    .string()
    .max(MAX_TASK_ID)
    .check((ctx) => {
      const problem = ctx.value.length > MAX_TASK_ID ? undefined : identifierProblem(ctx.value);
      if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
    });

/**
 * A record keyed by secret names ({@link SECRET_NAME}), values under the text rule: a key outside
 * the rule is refused naming it (`secrets.a b: must be a secret name: ...`).
 */
export const secretValues = (maxValue: number) =>
  z.record(text(128), text(maxValue)).check((ctx) => {
    for (const name of Object.keys(ctx.value)) {
      if (!SECRET_NAME.test(name))
        ctx.issues.push({
          code: 'custom',
          message: `must be a secret name: ${SECRET_NAME_RULE}`,
          input: name,
          path: [name],
        });
    }
  });

/** A field holding an orchestrator-chosen id ({@link AGENT_ID}). */
export const agentId = () => z.string().regex(AGENT_ID, `must be ${AGENT_ID_RULE}`);
/** A field holding a host id ({@link HOST_ID}). */
export const hostId = () => z.string().regex(HOST_ID, `must be ${HOST_ID_RULE}`);

/**
 * A credential that travels in an HTTP header (`Authorization: Bearer <token>`): visible ASCII
 * only, since anything else cannot be sent and would fail only at the first dial.
 */
export const headerToken = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .regex(/^[\x21-\x7e]+$/, 'must be visible ASCII (it is sent in an HTTP header)');
