// The body of scripts/gpu-check.sh (see there). Plain Node, no dependencies beyond the built agent.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

const agentBin = resolve('packages/agent/bin/orch-agent.js');
const assets = resolve(process.env.GPU_CHECK_ASSETS ?? '.data/orch-agent');
const wantBoot = process.env.GPU_CHECK_BOOT !== '0';
const token = randomBytes(24).toString('hex');
const dataDir = mkdtempSync(join(tmpdir(), 'orch-gpu-check-'));
const say = (line) => process.stdout.write(`${line}\n`);

// Kernel and images of an existing data dir, linked (never that dir itself: an agent there would
// take its VMs for strays).
const canBoot =
  existsSync(join(assets, 'kernel', 'kernel.json')) && existsSync(join(assets, 'images', 'busybox'));
if (canBoot) {
  symlinkSync(join(assets, 'kernel'), join(dataDir, 'kernel'));
  mkdirSync(join(dataDir, 'images'));
  for (const name of readdirSync(join(assets, 'images')))
    if (!name.startsWith('.')) symlinkSync(join(assets, 'images', name), join(dataDir, 'images', name));
}

const agent = spawn(process.execPath, [agentBin], {
  env: {
    ...process.env,
    MICROVM_AGENT_TOKEN: '',
    GPU_AGENT_TOKEN: token,
    AGENT_HOST: '127.0.0.1',
    AGENT_PORT: '0',
    AGENT_DATA_DIR: dataDir,
    AGENT_LOG_LEVEL: 'warn',
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
let exitCode = 0;
try {
  const url = await new Promise((ok, fail) => {
    createInterface({ input: agent.stdout }).on('line', (l) => {
      const m = /^orch-agent listening on (http:\/\/\S+)$/.exec(l);
      if (m) ok(m[1]);
    });
    agent.once('exit', (code) => fail(new Error(`orch-agent exited with ${code}`)));
  });
  const call = async (method, path, body) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const info = (await call('GET', '/v1/info')).body;
  say(`accelerator: ${info.accelerator}`);
  say(`gpu_status: ${JSON.stringify(info.gpu_status, null, 2)}`);
  say(`gpus: ${JSON.stringify(info.gpus)}`);
  for (const d of info.gpu_devices)
    say(
      `gpu ${d.index}: ${d.name} (model ${d.model ?? 'not in the catalog'}), ${d.memory_mb} MiB, ${d.uuid}, ${d.pci_address}, driver ${d.driver ?? 'none'}, IOMMU group ${d.iommu_group ?? 'none'} [${d.iommu_group_devices.join(' ')}], MIG ${d.mig_mode}${d.mig_instances.length ? ` (${d.mig_instances.map((i) => i.profile).join(', ')})` : ''}`,
    );
  const free = info.gpus.find((g) => g.free > 0);
  if (info.gpu_status.state !== 'ok') say(`no boot: GPU detection is ${info.gpu_status.state}`);
  else if (!info.gpu_status.passthrough.available)
    say(`no boot: cannot pass GPUs to a VM: missing ${info.gpu_status.passthrough.missing.join('; ')}`);
  else if (!free) say('no boot: no whole GPU is free (MIG mode on every GPU, or all held)');
  else if (!wantBoot) say('no boot: GPU_CHECK_BOOT=0');
  else if (!canBoot)
    say(
      `no boot: no kernel and busybox image under ${assets} (run npx orch-agent setup, or set GPU_CHECK_ASSETS)`,
    );
  else if (process.getuid?.() !== 0) say('no boot: binding a GPU to vfio-pci needs root');
  else {
    const id = `gpucheck${randomBytes(4).toString('hex')}`;
    say(`booting VM ${id} with one ${free.model} passed through ...`);
    const created = await call('POST', '/v1/vms', {
      id,
      spec: {
        cpus: 2,
        ram_mb: 4096,
        storage_gb: 2,
        max_runtime_seconds: 600,
        gpu: { model: free.model, count: 1 },
      },
      manifest_inline: Buffer.from(
        '{"version":"1","machine":{"workspace":"/workspace"},"services":{}}',
      ).toString('base64'),
      startup_script: '#!/bin/sh\ntrue\n',
    });
    if (created.status !== 202) throw new Error(`create refused: ${JSON.stringify(created.body)}`);
    let vm = created.body;
    for (let i = 0; i < 600 && vm.state === 'creating'; i++) {
      await new Promise((r) => setTimeout(r, 500));
      vm = (await call('GET', `/v1/vms/${id}`)).body;
    }
    say(`VM ${vm.state}${vm.error ? `: ${vm.error}` : ''}`);
    if (vm.state === 'running') {
      const ex = await call('POST', `/v1/vms/${id}/exec`, {
        argv: [
          'sh',
          '-c',
          'lspci 2>/dev/null || for d in /sys/bus/pci/devices/*; do echo "$(basename $d) $(cat $d/vendor):$(cat $d/device) class $(cat $d/class)"; done',
        ],
      });
      say(`lspci in the guest:\n${Buffer.from(ex.body.stdout_base64, 'base64').toString()}`);
      if (!/10de/.test(Buffer.from(ex.body.stdout_base64, 'base64').toString())) exitCode = 1;
    } else exitCode = 1;
    await call('DELETE', `/v1/vms/${id}`);
    const dev = info.gpu_devices.find((d) => d.model === free.model && d.held_by === null);
    const driver = dev ? basename(readlinkSync(`/sys/bus/pci/devices/${dev.pci_address}/driver`)) : 'unknown';
    say(`after delete, ${dev?.pci_address} is bound to ${driver}`);
    if (driver === 'vfio-pci') exitCode = 1;
  }
} catch (err) {
  say(`gpu-check failed: ${err.message}`);
  exitCode = 1;
} finally {
  agent.kill('SIGTERM');
  await new Promise((r) => agent.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
process.exit(exitCode);
