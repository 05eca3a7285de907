import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

/** Workspace packages resolve to their TypeScript sources (their `source` export), not to dist/. */
const workspaceAliases = Object.fromEntries(
  readdirSync('packages').flatMap((dir) => {
    const manifest = JSON.parse(readFileSync(join('packages', dir, 'package.json'), 'utf8')) as {
      name: string;
      exports?: { '.': { source?: string } };
    };
    const source = manifest.exports?.['.']?.source;
    return source ? [[manifest.name, join(import.meta.dirname, 'packages', dir, source)]] : [];
  }),
);

export default defineConfig({
  resolve: { conditions: ['source'], alias: workspaceAliases },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    globalSetup: ['scripts/vitest-global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
