import { OrchClient } from '../api-client.js';
import { ContextStore } from '../context-store.js';
import { contextsFile } from '../settings.js';

/**
 * A client of the current context's orchestrator. Without a current context it throws a CliError
 * that says how to make one (`orch connect`).
 */
export async function client(): Promise<OrchClient> {
  return new OrchClient((await new ContextStore(contextsFile()).current()).context);
}
