import { AGENT_ID, AGENT_ID_RULE, HOST_ID, HOST_ID_RULE } from '@orch/protocol';
import { UsageError } from './errors.js';

/** A kind of id the CLI puts in a URL path: the argument that names it, and its protocol pattern. */
export interface IdKind {
  /** As `--help` names the argument: `<env>`. */
  readonly argument: string;
  /** In words: `environment id`. */
  readonly what: string;
  readonly pattern: RegExp;
  readonly rule: string;
}

const orchestratorId = (argument: string, what: string): IdKind => ({
  argument,
  what,
  pattern: AGENT_ID,
  rule: AGENT_ID_RULE,
});

export const ENVIRONMENT_ID = orchestratorId('<env>', 'environment id');
export const SNAPSHOT_ID = orchestratorId('<snapshot>', 'snapshot id');
export const BUILD_ID = orchestratorId('<build>', 'build id');
export const API_KEY_ID = orchestratorId('<id>', 'API key id');
export const HOST_ID_KIND: IdKind = {
  argument: '<id>',
  what: 'host id',
  pattern: HOST_ID,
  rule: HOST_ID_RULE,
};

/**
 * `id` as one URL path segment: checked against the protocol's pattern for its kind, then
 * percent-encoded. So `..`, `.`, a slash or an empty id never reach a URL (where they would be
 * dot segments or extra segments that address another route); the orchestrator would refuse them
 * anyway. Call it before anything else a command does.
 *
 * @example
 * `/v1/environments/${idSegment(ENVIRONMENT_ID, id)}`
 * idSegment(ENVIRONMENT_ID, '..') // UsageError: <env> ".." is not an environment id (1-63 letters, ...)
 */
export function idSegment(kind: IdKind, id: string): string {
  return encodeURIComponent(checkId(kind, id));
}

/**
 * `id` checked against the protocol's pattern for its kind, as the orchestrator will check it,
 * before anything is sent: a {@link UsageError} naming `as` (the argument, or the flag that gave
 * it) otherwise.
 *
 * @example
 * checkId(HOST_ID_KIND, opts.id, '--id') // UsageError: --id "a b" is not a host id (1-63 letters, ...)
 */
export function checkId(kind: IdKind, id: string, as: string = kind.argument): string {
  if (!kind.pattern.test(id))
    throw new UsageError(`${as} ${JSON.stringify(id)} is not ${article(kind.what)} (${kind.rule})`);
  return id;
}

const article = (what: string) => `${/^[aeiouAEIOU]/.test(what) ? 'an' : 'a'} ${what}`;
