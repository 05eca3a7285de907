#!/usr/bin/env node
// The `orch-agent` command: the host agent, bundled into ../dist at install time.
import('../dist/orch-agent.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/orch-agent.js')) {
    process.stderr.write(
      'orch-agent: not built yet; run `npm install` (or `npm run build`) at the repository root\n',
    );
    process.exit(1);
  }
  throw err;
});
