import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_VM_STATES } from '@orch/protocol';
import { scrapeMetrics } from '@support/server/testing';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentProcess, vmRequest } from './agent-process.js';

/**
 * `GET /metrics` and request ids of the real agent binary, without VMs (no QEMU needed): it is behind the agent
 * token, parses as Prometheus text, and its series move with requests. Boot, snapshot and exec
 * durations are exercised by the VM suites' agents.
 */
describe('orch-agent /metrics', () => {
  let agent: AgentProcess;
  const dataDir = mkdtempSync(join(tmpdir(), 'orch-agent-metrics-'));
  const scrape = () => scrapeMetrics(`${agent.url}/metrics`, { authorization: `Bearer ${agent.token}` });

  beforeAll(async () => {
    agent = await AgentProcess.start({ dataDir });
  });
  afterAll(async () => {
    await agent?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("logs each request under the caller's x-request-id (orchd sends its own) and answers it", async () => {
    const res = await fetch(`${agent.url}/v1/vms`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${agent.token}`,
        'content-type': 'application/json',
        'x-request-id': 'orchd-req-42',
      },
      body: JSON.stringify(vmRequest('vm-rid')),
    });
    expect(res.headers.get('x-request-id')).toBe('orchd-req-42');
    const line = agent.output
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, unknown>];
        } catch {
          return [];
        }
      })
      .find((l) => l.request_id === 'orchd-req-42');
    expect(line).toMatchObject({ msg: 'request', method: 'POST', route: '/v1/vms', status: res.status });
  });

  test('needs the agent token', async () => {
    const r = await agent.request('GET', '/metrics', undefined, 'wrong-token');
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ error: { code: 'unauthorized' } });
  });

  test('process, VM, accelerator and disk series; HTTP by route template', async () => {
    await agent.request('GET', '/v1/vms/vm-not-here');
    await agent.request('POST', '/v1/vms', vmRequest('vm-m1'));
    await agent.request('GET', '/v1/vms/vm-zzz/unknown-route');
    const m = await scrape();
    expect(m.family('process_cpu_seconds_total')?.type).toBe('COUNTER');
    expect(m.value('orch_agent_vms')).toBe(0);
    expect(
      m
        .family('orch_agent_vms')
        ?.metrics.map((s) => s.labels?.state)
        .sort(),
    ).toEqual([...AGENT_VM_STATES].sort());
    expect(m.family('orch_agent_accelerator_info')?.metrics).toHaveLength(1);
    expect(m.value('orch_agent_disk_free_bytes')).toBeGreaterThan(0);
    expect(
      m.value('orch_agent_http_requests_total', { route: '/v1/vms/:id', method: 'GET', status: '404' }),
    ).toBe(1);
    expect(m.value('orch_agent_http_requests_total', { route: '/v1/vms', method: 'POST' })).toBe(2);
    expect(m.value('orch_agent_http_requests_total', { route: 'unmatched', status: '404' })).toBe(1);
    expect(m.value('orch_agent_http_requests_total', { route: '/metrics', status: '401' })).toBe(1);
    for (const f of [
      'orch_agent_vm_boot_duration_seconds',
      'orch_agent_snapshot_duration_seconds',
      'orch_agent_exec_duration_seconds',
    ])
      expect(m.family(f)?.type).toBe('HISTOGRAM');
    const labels = m.families.flatMap((f) => f.metrics.flatMap((s) => Object.values(s.labels ?? {})));
    expect(labels.some((v) => v.includes('vm-') || v.includes(agent.token))).toBe(false);
  });
});
