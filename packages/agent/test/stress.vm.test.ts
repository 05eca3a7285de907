import { type ChildProcess, spawn } from 'node:child_process';
import type { AgentVm } from '@orch/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentProcess, qemuAvailable, vmRequest } from './agent-process.js';

const hasQemu = qemuAvailable();

/**
 * Consecutive boots while every host core is busy: the TCG timer-calibration hang of microvm
 * (notes/qemu-microvm.md) showed up under load in 3-8 % of boots before `tsc_early_khz`, and a
 * guest agent that never answered showed up here in 2 of 5 before the hello handshake. The issue
 * asks for 30 boots, and that is the default: they passed (no hung guest) in 8 min on the shared
 * 2-core machine while other suites ran (16 s per boot, load average 8-11), about 5 min when the VM
 * suites run alone, as they do in the test command (after every other suite).
 * AGENT_STRESS_BOOTS=N runs another count.
 */
const BOOTS = Number(process.env.AGENT_STRESS_BOOTS ?? 30);

describe.skipIf(!hasQemu)('boot reliability under host load', () => {
  let dataDir: string;
  let agent: AgentProcess;
  const burners: ChildProcess[] = [];

  beforeAll(async () => {
    dataDir = AgentProcess.makeDataDir();
    agent = await AgentProcess.start({ dataDir });
    const cores = (await import('node:os')).cpus().length;
    for (let i = 0; i < cores; i++) {
      burners.push(spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }));
    }
  }, 600_000);

  afterAll(async () => {
    for (const b of burners) b.kill('SIGKILL');
    await agent?.stop();
    if (dataDir) AgentProcess.removeDataDir(dataDir);
  });

  test(`${BOOTS} consecutive boots with every core busy: no hung guest`, async () => {
    const failures: string[] = [];
    for (let i = 0; i < BOOTS; i++) {
      const id = `stress-${i}`;
      const created = await agent.request<AgentVm>('POST', '/v1/vms', vmRequest(id));
      expect(created.status).toBe(202);
      const vm = await agent.waitVm(id);
      if (vm.state !== 'running') failures.push(`${id}: ${vm.state}: ${vm.error}`);
      else {
        const r = await agent.exec(id, ['cat', '/proc/uptime']);
        if (r.exit_code !== 0) failures.push(`${id}: exec exit ${r.exit_code}`);
      }
      expect((await agent.request('DELETE', `/v1/vms/${id}`)).status).toBe(204);
    }
    expect(failures).toEqual([]);
  }, 1_200_000);
});
