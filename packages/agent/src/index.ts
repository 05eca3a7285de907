/** `@orch/agent`: the host agent as a library (the `orch-agent` program is `main.ts`). */
export { type Config, ConfigError, loadConfig, loadSetupConfig, OPTIONS, SETUP_OPTIONS } from './config.js';
export { AgentError } from './errors.js';
export { runSetup } from './images/setup.js';
export { AGENT_VERSION, Agent } from './server.js';
