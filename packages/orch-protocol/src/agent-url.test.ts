import { describe, expect, test } from 'vitest';
import { checkAgentUrl } from './agent-url.js';

describe('agent URL check (orchestrator.md, "Host registration validation")', () => {
  test.each([
    'http://u:p@127.0.0.1:1',
    'http://u@127.0.0.1:1',
    'http://@127.0.0.1:1',
    'http://:@127.0.0.1:1',
    'http:@127.0.0.1:1',
    'https:\\\\@127.0.0.1:1',
    'http://\t@127.0.0.1:1',
    ' http://@127.0.0.1:1/path',
  ])('any userinfo is refused, even an empty one the parser drops: %j', (raw) => {
    expect(checkAgentUrl(raw)).toEqual({ ok: false, reason: 'agent_url must not embed credentials' });
  });

  test('an @ after the authority is no userinfo', () => {
    expect(checkAgentUrl('http://127.0.0.1:1/a@b')).toEqual({ ok: true, url: 'http://127.0.0.1:1/a@b' });
    expect(checkAgentUrl('http://10.0.0.5:9090/')).toEqual({ ok: true, url: 'http://10.0.0.5:9090' });
  });
});
