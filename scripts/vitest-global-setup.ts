import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEMPLATE_DIR_ENV } from '@support/pg/test-server';

/**
 * Tests run the programs as users do, so bundle them first (about a second). The workers inherit
 * two directories through the environment: the guest assets of the VM tests
 * (`ORCH_TEST_AGENT_ASSETS`, named by scripts/test-agent-assets.mjs unless already set), and one
 * where the run's test PostgreSQL servers share an initialised cluster (`TestPostgres`), removed
 * when the run ends.
 */
export default function setup(): () => void {
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
  process.env.ORCH_TEST_AGENT_ASSETS = execFileSync(process.execPath, ['scripts/test-agent-assets.mjs'], {
    encoding: 'utf8',
  }).trim();
  const templates = mkdtempSync(join(tmpdir(), 'test-pg-template-'));
  chmodSync(templates, 0o755);
  process.env[TEMPLATE_DIR_ENV] = templates;
  return () => rmSync(templates, { recursive: true, force: true });
}
