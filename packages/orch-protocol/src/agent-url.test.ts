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

describe('link-local agent URLs are refused before any dial, in every spelling the parser reads', () => {
  const V4 = '169.254.0.0/16, where the cloud metadata service answers';
  const refused = (host: string, range: string) => ({
    ok: false,
    reason: `agent_url host ${host} is link-local (${range}); agents are never dialled there`,
  });

  test.each([
    ['http://169.254.169.254/', '169.254.169.254', V4],
    ['http://169.254.169.254:80/latest/meta-data', '169.254.169.254', V4],
    ['https://169.254.0.1:9090', '169.254.0.1', V4],
    ['http://169.254.255.255', '169.254.255.255', V4],
    ['http://2852039166/', '2852039166 (169.254.169.254)', V4],
    ['http://0xa9fea9fe/', '0xa9fea9fe (169.254.169.254)', V4],
    ['http://0251.0376.0251.0376/', '0251.0376.0251.0376 (169.254.169.254)', V4],
    ['http://169.254.43518/', '169.254.43518 (169.254.169.254)', V4],
    ['http://169.254.169.254./', '169.254.169.254. (169.254.169.254)', V4],
    ['http://%31%36%39.254.169.254/', '%31%36%39.254.169.254 (169.254.169.254)', V4],
    ['http://[fe80::1]:9090', '[fe80::1]', 'fe80::/10'],
    ['http://[FEBF:ffff::1]', '[febf:ffff::1]', 'fe80::/10'],
    ['http://[fe80:0:0:0:0:0:0:1]/', '[fe80:0:0:0:0:0:0:1] ([fe80::1])', 'fe80::/10'],
    [
      'http://[::ffff:169.254.169.254]/',
      '[::ffff:169.254.169.254] ([::ffff:a9fe:a9fe])',
      `it embeds 169.254.169.254, in ${V4}`,
    ],
    ['http://[::ffff:a9fe:a9fe]/', '[::ffff:a9fe:a9fe]', `it embeds 169.254.169.254, in ${V4}`],
    [
      'http://[0:0:0:0:0:ffff:a9fe:0101]/',
      '[0:0:0:0:0:ffff:a9fe:0101] ([::ffff:a9fe:101])',
      `it embeds 169.254.1.1, in ${V4}`,
    ],
    [
      'http://[::ffff:0:169.254.169.254]/',
      '[::ffff:0:169.254.169.254] ([::ffff:0:a9fe:a9fe])',
      `it embeds 169.254.169.254, in ${V4}`,
    ],
    [
      'http://[::169.254.169.254]/',
      '[::169.254.169.254] ([::a9fe:a9fe])',
      `it embeds 169.254.169.254, in ${V4}`,
    ],
    [
      'http://[64:ff9b::169.254.169.254]/',
      '[64:ff9b::169.254.169.254] ([64:ff9b::a9fe:a9fe])',
      `it embeds 169.254.169.254, in ${V4}`,
    ],
  ])('%s', (raw, host, range) => {
    expect(checkAgentUrl(raw)).toEqual(refused(host, range));
  });

  test.each([
    ['http://127.0.0.1:9090', 'http://127.0.0.1:9090'],
    ['http://2130706433:9090/', 'http://127.0.0.1:9090'],
    ['http://10.0.0.5:9090', 'http://10.0.0.5:9090'],
    ['http://192.168.1.2:9090', 'http://192.168.1.2:9090'],
    ['http://172.16.0.1', 'http://172.16.0.1'],
    ['http://169.253.255.255', 'http://169.253.255.255'],
    ['http://169.255.0.1', 'http://169.255.0.1'],
    ['http://[::1]:9090', 'http://[::1]:9090'],
    ['http://[::]:9090', 'http://[::]:9090'],
    ['http://[fec0::1]', 'http://[fec0::1]'],
    ['http://[fd00::1]', 'http://[fd00::1]'],
    ['http://[::ffff:10.0.0.1]', 'http://[::ffff:a00:1]'],
    ['http://[2001:db8::a9fe:a9fe]', 'http://[2001:db8::a9fe:a9fe]'],
    ['http://agent.internal:9090', 'http://agent.internal:9090'],
    ['http://169.254.example:9090', 'http://169.254.example:9090'],
  ])('%s is an agent address like any other', (raw, url) => {
    expect(checkAgentUrl(raw)).toEqual({ ok: true, url });
  });
});
