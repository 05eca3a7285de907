import { LOG_WINDOW_BYTES } from '@orch/protocol';
import { sleep } from '@support/server';
import { AgentError } from '../errors.js';
import { SERVICE_STATUS_SCRIPT } from '../images/guest-services.js';
import { parseServiceStatus, serviceLogScript } from './services.js';
import type { Vm } from './vm.js';

/**
 * The manifest services of running VMs, asked through each guest's channel (README "Services"):
 * their status, polled every few seconds into the VM's record, and their logs, read on request.
 * What the host prepares before a boot (image disks, OCI configs) and the guest scripts' answers
 * parsed are `services.ts`; what the guest runs is `images/guest-services.ts`.
 */
export class VmServices {
  constructor(
    /** The manager's VMs by id (read only: the services of each are in its record). */
    private readonly vms: ReadonlyMap<string, Vm>,
  ) {}

  /**
   * Asks the guest of every running VM with services for their status (one exec each) and keeps it
   * in the VM's record, where `GET /v1/vms` reads it. Called every few seconds by the agent
   * ({@link VmServices.watch}); a guest that does not answer keeps its last status.
   */
  async refresh(): Promise<void> {
    const vms = [...this.vms.values()].filter(
      (v) => v.record.state === 'running' && v.channel && v.record.services.length > 0,
    );
    await Promise.all(
      vms.map(async (vm) => {
        try {
          const r = await vm.channel!.exec(SERVICE_STATUS_SCRIPT, Buffer.alloc(0), 20, 64 * 1024);
          if (r.exitCode === 0)
            vm.record.services = parseServiceStatus(vm.record.services, r.stdout.toString('utf8'));
        } catch {
          // The VM stopped or is busy (paused for a snapshot): the next round asks again.
        }
      }),
    );
  }

  /** Refreshes service statuses every `intervalMs` until `signal` aborts. */
  watch(signal: AbortSignal, intervalMs = 3000): void {
    const tick = async () => {
      while (!signal.aborted) {
        await this.refresh().catch(() => undefined);
        await sleep(intervalMs, signal).catch(() => undefined);
      }
    };
    void tick();
  }

  /**
   * A window of service `name`'s output (stdout and stderr, and the supervisor's own `[orch]`
   * lines) of a running VM, read from the guest, where it is kept rotated (guest-services.ts).
   * Offsets are absolute; `offset` is where the window starts. An unknown service is `404`.
   */
  async log(
    vm: Vm,
    name: string,
    window: { offset?: number | undefined; tail?: number | undefined },
  ): Promise<{ bytes: Buffer; offset: number; size: number }> {
    const { id } = vm.record;
    if (!vm.record.services.some((s) => s.name === name)) {
      throw AgentError.notFound('service', name);
    }
    const r = await vm
      .channel!.exec(
        serviceLogScript(name, window, LOG_WINDOW_BYTES),
        Buffer.alloc(0),
        30,
        LOG_WINDOW_BYTES + 64,
      )
      .catch((err: Error) => {
        throw AgentError.unavailable(`could not read the log of service ${name}: ${err.message}`, { id });
      });
    const nl = r.stdout.indexOf(0x0a);
    const [start = 0, size = 0] = r.stdout
      .subarray(0, Math.max(nl, 0))
      .toString('utf8')
      .split(' ')
      .map(Number);
    return { bytes: nl < 0 ? Buffer.alloc(0) : r.stdout.subarray(nl + 1), offset: start, size };
  }
}
