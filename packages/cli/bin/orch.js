#!/usr/bin/env node
// The `orch` command. Its code is bundled into ../dist at install time (`npm install` runs the
// root `prepare` script), so start-up loads one small file instead of hundreds of modules.
import('../dist/orch.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/orch.js')) {
    process.stderr.write(
      'orch: the CLI is not built yet; run `npm install` (or `npm run build`) at the repository root\n',
    );
    process.exit(1);
  }
  throw err;
});
