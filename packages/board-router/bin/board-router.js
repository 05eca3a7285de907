#!/usr/bin/env node
// The `board-router` command. Its code is bundled into ../dist at install time (`npm install` runs
// the root `prepare` script); its dependencies stay external (see build.mjs).
import('../dist/board-router.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/board-router.js')) {
    process.stderr.write(
      'board-router: not built yet; run `npm install` (or `npm run build`) at the repository root\n',
    );
    process.exit(1);
  }
  throw err;
});
