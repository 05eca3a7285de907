/**
 * How long orchd waits for its agent, per operation, in seconds: orchd bounds its agent calls with
 * these, and a client of orchd (the CLI) waits as long plus {@link CLIENT_MARGIN_SECONDS}
 * ({@link clientDeadlineMs}), so a client never gives up on an answer orchd is still allowed to
 * give. One table, so that the two sides cannot drift apart again (a 30 s CLI deadline cut an exec
 * orchd would have waited 90 s for).
 */
export const ORCHD_WAIT_SECONDS = {
  /** A pause or a resume: the VM's memory saved to disk or read back (`?action=pause|resume`). */
  pauseResume: 300,
  /** An agent writing a snapshot (guest sync, pause, disk flattened, memory saved for a live one). */
  snapshot: 600,
  /** An artifact copied to another host (a restore or a seed elsewhere) or to an export. */
  transfer: 1800,
  /** An exec waits for its own `timeout_seconds` plus this. */
  execMargin: 30,
  /** Any other agent call: the default of orchd's `ORCH_AGENT_TIMEOUT_SEC`. */
  agentCall: 30,
} as const;

/** What a client adds to orchd's wait: orchd's own work (store, placement) and the network. */
export const CLIENT_MARGIN_SECONDS = 30;

/**
 * The deadline of a client's call whose answer orchd may take `orchdSeconds` to give (the sum of
 * the agent waits the operation makes), margin included, in ms.
 *
 * @example clientDeadlineMs(ORCHD_WAIT_SECONDS.pauseResume) // 330_000
 */
export function clientDeadlineMs(orchdSeconds: number): number {
  return (orchdSeconds + CLIENT_MARGIN_SECONDS) * 1000;
}

/** orchd's wait for an exec of `timeoutSeconds` (the command's own limit plus the margin), in ms. */
export function execWaitMs(timeoutSeconds: number): number {
  return (timeoutSeconds + ORCHD_WAIT_SECONDS.execMargin) * 1000;
}
