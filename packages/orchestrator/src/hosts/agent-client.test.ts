/**
 * The agent client refuses, before any dial, an agent URL that today's rules refuse: a host stored
 * before the link-local rule existed is never dialled (the cloud metadata address included).
 */
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { AgentCallError, AgentClient, requireDialable } from './agent-client.js';

describe('AgentClient', () => {
  it('never dials a stored agent URL that the agent URL rules refuse', async () => {
    for (const url of ['http://169.254.169.254', 'http://2852039166:9090', 'http://[fe80::1]:9090']) {
      const err = await new AgentClient(url, 'token', 60_000).info().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AgentCallError);
      expect(err).toMatchObject({
        code: 'unavailable',
        kind: 'unreachable',
        details: { agent_error: 'refused_url' },
      });
      expect((err as Error).message).toMatch(/^not dialled: agent_url host .* is link-local/);
    }
    expect(() => requireDialable('http://169.254.0.1:9090')).toThrow(/link-local/);
  });

  it('dials an agent URL the rules accept', async () => {
    let calls = 0;
    const server = createServer((_req, res) => {
      calls++;
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'unauthorized', message: 'bad token' } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as { port: number };
      const err = await new AgentClient(`http://127.0.0.1:${port}`, 'token').info().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AgentCallError);
      expect(calls).toBe(1);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
