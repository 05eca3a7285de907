#!/usr/bin/env node
// The `orchd` command: the orchestrator server, bundled into ../dist at install time.
import('../dist/orchd.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/orchd.js')) {
    process.stderr.write(
      'orchd: not built yet; run `npm install` (or `npm run build`) at the repository root\n',
    );
    process.exit(1);
  }
  throw err;
});
