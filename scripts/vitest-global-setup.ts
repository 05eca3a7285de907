import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEMPLATE_DIR_ENV } from '@support/pg/test-server';

/**
 * Tests run the programs as users do, so bundle them first (about a second). The run's test
 * PostgreSQL servers share one initialised cluster, kept in a directory that lives as long as the
 * run (`TestPostgres`); the workers inherit its path.
 */
export default function setup(): () => void {
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
  const templates = mkdtempSync(join(tmpdir(), 'test-pg-template-'));
  chmodSync(templates, 0o755);
  process.env[TEMPLATE_DIR_ENV] = templates;
  return () => rmSync(templates, { recursive: true, force: true });
}
