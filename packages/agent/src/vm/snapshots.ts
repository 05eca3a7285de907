import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { AgentVm, CreateSnapshotRequest, SnapshotArtifact } from '@orch/protocol';
import type { Logger } from 'pino';
import { AgentError, isDiskFull } from '../errors.js';
import type { Layout } from '../images/layout.js';
import type { KernelMeta } from '../images/setup.js';
import { CommandError, run } from '../util/run.js';
import type { Accelerator } from './accel.js';
import { saveStatePlain } from './saved-state.js';
import type { Vm } from './vm.js';

/** How long the migration stream of a live snapshot may take before it falls back to disk. */
const LIVE_TIMEOUT_MS = 300_000;

/** What `snapshots/<id>/snapshot.json` holds. */
export interface SnapshotMeta extends SnapshotArtifact {
  readonly spec: AgentVm['spec'];
  readonly append: string;
  readonly kernel: string;
  readonly accelerator: Accelerator;
  /** `qemu-system-x86_64 --version`'s first line where the snapshot was taken (a live one resumes only under the same). */
  readonly qemu_version?: string;
  /** The image its disk descends from (the VM's `base_image`); absent when unknown. */
  readonly base_image?: string;
}

export interface SnapshotsDeps {
  readonly layout: Layout;
  readonly kernel: () => Promise<KernelMeta | undefined>;
  /** The QEMU version line of this host (recorded in live snapshots). */
  readonly qemuVersion: () => Promise<string>;
  /** This host's accelerator (a live snapshot resumes only under the one it was taken under). */
  readonly accelerator: Accelerator;
  readonly logger: Logger;
}

/**
 * The snapshots of this host, one directory each (`snapshots/<id>/disk.qcow2`, `state.bin` for a
 * live one, `snapshot.json`). Every id goes through {@link Layout.snapshotDir}, which refuses one
 * that does not match `AGENT_ID` before any path is built from it.
 */
export class Snapshots {
  constructor(private readonly deps: SnapshotsDeps) {}

  /** Whether a complete snapshot `id` exists (the id is validated first). */
  exists(id: string): boolean {
    return existsSync(join(this.deps.layout.snapshotDir(id), 'snapshot.json'));
  }

  /**
   * Writes snapshot `req.snapshot_id` of a running VM; the caller serializes it with the VM's other
   * work. The VM is paused (QMP `stop`, which drains and flushes the disk) for the copy and resumed
   * after. Disk: a flattened standalone qcow2 of the root disk. Live: the migration stream (memory
   * and devices, migrated to a socket of the agent into `state.bin`) plus the same disk copy; if the migration fails, the
   * snapshot falls back to disk and says `kind: disk`.
   */
  async take(vm: Vm, req: CreateSnapshotRequest): Promise<SnapshotArtifact> {
    const { logger } = this.deps;
    const dir = this.deps.layout.snapshotDir(req.snapshot_id);
    const qmp = vm.qmp!;
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    let kind: 'disk' | 'live' = 'disk';
    // Flush the guest's page cache to its disk first, so that the disk artifact holds every write
    // the guest has made (the memory state alone would hide unwritten data from a cold boot).
    await vm.channel!.exec('exec sync\n', Buffer.alloc(0), 30, 1024).catch((err: unknown) => {
      logger.warn({ vm: vm.record.id, err: (err as Error).message }, 'guest sync before the snapshot failed');
    });
    try {
      await qmp.execute('stop');
      if (req.live) {
        try {
          // Through a socket of the agent: QEMU (the VM's own uid) cannot write the snapshot dir.
          await saveStatePlain(
            qmp,
            join(dir, 'state.bin'),
            join(vm.dir, 'snapshot.sock'),
            Date.now() + LIVE_TIMEOUT_MS,
            vm.record.uid,
          );
          kind = 'live';
        } catch (err) {
          logger.warn(
            { vm: vm.record.id, err: (err as Error).message },
            'live snapshot failed; taking a disk snapshot',
          );
          await rm(join(dir, 'state.bin'), { force: true });
        }
      }
      await flattenDisk(vm.dir, dir);
      if (kind === 'live') await vm.log.copyTo(join(dir, 'startup.log')).catch(() => undefined);
    } catch (err) {
      throw await snapshotFailed(dir, err);
    } finally {
      await qmp.execute('cont').catch(() => undefined);
    }
    const files = ['disk.qcow2', ...(kind === 'live' ? ['state.bin'] : [])];
    const meta = await this.writeMeta(vm, req.snapshot_id, kind, files);
    logger.info(
      { vm: vm.record.id, snapshot: req.snapshot_id, kind, size: meta.size_bytes },
      'snapshot taken',
    );
    return artifactOf(meta);
  }

  /**
   * A live snapshot of a **paused** VM (to move it to another host): its saved state decrypted
   * (`decrypt`, saved-state.ts) into `state.bin`, and a flattened copy of its disk. The VM stays
   * paused; a resume in place still works afterwards.
   */
  async fromSaved(
    vm: Vm,
    snapshotId: string,
    decrypt: (out: string) => Promise<void>,
  ): Promise<SnapshotArtifact> {
    const dir = this.deps.layout.snapshotDir(snapshotId);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    try {
      await decrypt(join(dir, 'state.bin'));
      await flattenDisk(vm.dir, dir);
      await vm.log.copyTo(join(dir, 'startup.log')).catch(() => undefined);
    } catch (err) {
      throw await snapshotFailed(dir, err);
    }
    const meta = await this.writeMeta(vm, snapshotId, 'live', ['disk.qcow2', 'state.bin']);
    this.deps.logger.info({ vm: vm.record.id, snapshot: snapshotId }, 'live snapshot of a paused VM taken');
    return artifactOf(meta);
  }

  private async writeMeta(
    vm: Vm,
    snapshotId: string,
    kind: 'disk' | 'live',
    files: string[],
  ): Promise<SnapshotMeta> {
    const dir = this.deps.layout.snapshotDir(snapshotId);
    let size = 0;
    for (const f of files) size += (await stat(join(dir, f))).size;
    const meta: SnapshotMeta = {
      snapshot_id: snapshotId,
      vm_id: vm.record.id,
      kind,
      size_bytes: size,
      digest: await sha256File(join(dir, 'disk.qcow2')),
      ...(kind === 'live' ? { state_digest: await sha256File(join(dir, 'state.bin')) } : {}),
      arch: 'amd64',
      created_at: new Date().toISOString(),
      spec: vm.record.spec,
      append: vm.record.append,
      kernel: vm.record.kernel ?? (await this.deps.kernel())!.kernel,
      accelerator: vm.record.accelerator as Accelerator,
      qemu_version: await this.deps.qemuVersion(),
      ...(vm.record.base_image ? { base_image: vm.record.base_image } : {}),
    };
    await writeFile(join(dir, 'snapshot.json'), `${JSON.stringify(meta, null, 2)}\n`);
    return meta;
  }

  /**
   * The image snapshot `meta`'s disk descends from: recorded, or for a snapshot written before it
   * was, the image its VM named (such a VM booted that image: an image and a snapshot were never
   * accepted together then); undefined when it cannot be told.
   */
  static baseImage(meta: SnapshotMeta): string | undefined {
    return meta.base_image ?? meta.spec.image;
  }

  /** `snapshot.json` of snapshot `id`; `not_found` when there is none. */
  async meta(id: string): Promise<SnapshotMeta> {
    const dir = this.deps.layout.snapshotDir(id);
    try {
      return JSON.parse(await readFile(join(dir, 'snapshot.json'), 'utf8')) as SnapshotMeta;
    } catch {
      throw AgentError.notFound('snapshot', id);
    }
  }

  /**
   * Whether a live snapshot can resume on this host (portability rules, agent README): the same
   * accelerator (`400`), the same QEMU version and the same guest kernel (`409`); a guest never
   * resumes on a machine model or device set it was not saved from. Returns the kernel file to boot.
   */
  async portableHere(snapshot: SnapshotMeta, kernel: KernelMeta): Promise<string> {
    const id = snapshot.snapshot_id;
    if (snapshot.accelerator !== this.deps.accelerator) {
      throw AgentError.invalid(
        `snapshot ${id} was taken under ${snapshot.accelerator}; this host runs ${this.deps.accelerator}`,
        { reason: 'not_portable' },
      );
    }
    const qemu = await this.deps.qemuVersion();
    if (snapshot.qemu_version && snapshot.qemu_version !== qemu) {
      throw AgentError.conflict(
        `live snapshot ${id} was taken under ${snapshot.qemu_version}; this host has ${qemu}: its memory state cannot resume here (restore a disk snapshot instead)`,
        { reason: 'not_portable' },
      );
    }
    if (existsSync(snapshot.kernel)) return snapshot.kernel;
    // Fetched from another host: the same kernel build under this host's data dir.
    if (basename(snapshot.kernel) === basename(kernel.kernel)) return kernel.kernel;
    throw AgentError.conflict(
      `live snapshot ${id} runs guest kernel ${basename(snapshot.kernel)}; this host has ${basename(kernel.kernel)}`,
      { reason: 'not_portable' },
    );
  }

  /** `DELETE /v1/snapshots/{id}`. VMs restored from it have their own copy of the disk. */
  async delete(id: string): Promise<void> {
    await this.meta(id);
    await rm(this.deps.layout.snapshotDir(id), { recursive: true, force: true });
  }

  /** `GET /v1/snapshots/{id}/data`: the rootfs artifact (the qcow2 whose sha256 is `digest`). */
  async data(id: string): Promise<{ path: string; size: number }> {
    await this.meta(id);
    const path = join(this.deps.layout.snapshotDir(id), 'disk.qcow2');
    return { path, size: (await stat(path)).size };
  }
}

/** The wire view of a snapshot's metadata. */
export function artifactOf(m: SnapshotMeta): SnapshotArtifact {
  return {
    snapshot_id: m.snapshot_id,
    vm_id: m.vm_id,
    kind: m.kind,
    size_bytes: m.size_bytes,
    digest: m.digest,
    ...(m.state_digest ? { state_digest: m.state_digest } : {}),
    accelerator: m.accelerator,
    arch: m.arch,
    created_at: m.created_at,
  };
}

async function sha256File(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** The VM's disk (overlay and its base) as one standalone qcow2 in the snapshot directory `dir`. */
function flattenDisk(vmDir: string, dir: string): Promise<unknown> {
  return run([
    'qemu-img',
    'convert',
    '-U',
    '-O',
    'qcow2',
    join(vmDir, 'disk.qcow2'),
    join(dir, 'disk.qcow2'),
  ]);
}

/** Removes a half-written snapshot directory and returns the error to answer for `err`. */
async function snapshotFailed(dir: string, err: unknown): Promise<unknown> {
  await rm(dir, { recursive: true, force: true });
  if (isDiskFull(err)) return AgentError.diskFull('the host disk is full: the snapshot could not be written');
  return err instanceof CommandError ? AgentError.unavailable(`snapshot failed: ${err.message}`) : err;
}
