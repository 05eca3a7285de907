import { readFileSync } from 'node:fs';
import { EVENT_KINDS } from '@orch/protocol';
import { expect, test } from 'vitest';

/**
 * The event kinds the READMEs list are `EVENT_KINDS` of `@orch/protocol` (the route summary and
 * `orch events --type` are made from it): a kind added there and not documented fails here.
 */
const readme = (path: string) => readFileSync(new URL(path, import.meta.url), 'utf8');

test("the orchestrator README's Events section names every event kind", () => {
  const text = readme('../README.md');
  const events = text.slice(
    text.indexOf('\n## Events'),
    text.indexOf('\n## ', text.indexOf('\n## Events') + 1),
  );
  for (const kind of EVENT_KINDS)
    expect(events.includes(`\`${kind}\``) || events.includes(`\`${kind}.`), kind).toBe(true);
});

test("the CLI README's orch events row names every kind for --type", () => {
  const row = readme('../../cli/README.md')
    .split('\n')
    .find((l) => l.startsWith('| `orch events`'));
  for (const kind of EVENT_KINDS) expect(row, kind).toContain(`\`${kind}\``);
});
