import { execFileSync } from 'node:child_process';

/** Tests run the programs as users do, so bundle them first (about a second). */
export default function setup(): void {
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
}
