/**
 * Patterns of the ids the host-agent protocol carries, defined once: the schemas validate request
 * bodies with them, and `orch-agent` checks every id against them before it becomes part of a
 * path under its data dir (an id that does not match never touches the filesystem).
 */

/**
 * VM and snapshot ids, chosen by the orchestrator: 1-63 letters, digits, `_` and `-`, starting with
 * a letter or digit (so never `.`, `..`, a slash, a backslash or a NUL).
 *
 * @example AGENT_ID.test('env-42-snap') // true; AGENT_ID.test('../x') // false
 */
export const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

/**
 * Image names (`spec.image`, `orch-agent image import NAME`, `images` of `/v1/info`): 1-63
 * lower-case letters, digits, `.`, `_` and `-`, starting with a letter or digit.
 *
 * @example IMAGE_NAME.test('debian-12') // true; IMAGE_NAME.test('..') // false
 */
export const IMAGE_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/**
 * Manifest service names (`services.<name>` of the definition file and of the manifest): 1-63
 * lower-case letters, digits, `_` and `-`, starting with a letter. They become guest paths and
 * container ids (so no `.`, `..`, slash or upper case), and they are JSON keys kept in file order
 * (so never integer-like, which JSON objects would move to the front). The one rule of
 * `orch compile` (`@orch/envdef`), of orchd's and the agent's manifest check and of `?service=`;
 * see `serviceNameProblem` (rules.ts).
 *
 * @example SERVICE_NAME.test('db') // true; SERVICE_NAME.test('Web'), SERVICE_NAME.test('1db') // false
 */
export const SERVICE_NAME = /^[a-z][a-z0-9_-]{0,62}$/;

/** In words, for error messages. */
export const ID_RULES = {
  agentId: '1-63 letters, digits, "_" or "-", starting with a letter or digit',
  imageName: '1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit',
  serviceName: '1-63 lower-case letters, digits, "_" or "-", starting with a letter',
} as const;
