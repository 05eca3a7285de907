#!/usr/bin/env node
// The `board-node` command. Its code is bundled into ../dist at install time (`npm install` runs
// the root `prepare` script); native and binary-shipping packages stay external (see build.mjs).
import('../dist/board-node.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/board-node.js')) {
    process.stderr.write(
      'board-node: not built yet; run `npm install` (or `npm run build`) at the repository root\n',
    );
    process.exit(1);
  }
  throw err;
});
