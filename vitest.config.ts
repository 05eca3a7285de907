import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['source'] },
  // Tests run in Vite's SSR environment, which has its own condition list: workspace packages
  // resolve to their TypeScript sources there too.
  ssr: { resolve: { conditions: ['source', 'module', 'node', 'development|production'] } },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    globalSetup: ['scripts/vitest-global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
