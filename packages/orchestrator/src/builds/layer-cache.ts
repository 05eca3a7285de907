import { type CreateBuildRequest, type Host, OrchError } from '@orch/protocol';
import type { Agents } from '../environments/agents.js';
import { takeSnapshot } from '../environments/snapshot-service.js';
import type { HostService } from '../hosts/host-service.js';
import type { OrchdMetrics } from '../metrics.js';
import type { SnapshotRow, SnapshotsRepo } from '../store/snapshots-repo.js';
import { BUILD_LINE_ENV, layerKeys, secretMacs } from './layer-key.js';

/** Where a build starts: the keys for one (arch, base digest) and the layers already kept. */
export interface Plan {
  readonly host: Host;
  readonly arch: string;
  readonly digest: string;
  readonly keys: string[];
  /** The cached prefix: `hits[i]` is the kept layer of line i. */
  readonly hits: SnapshotRow[];
}

/** One new layer: the build VM's disk after setup line `index` ran. */
export interface NewLayer {
  readonly vmId: string;
  readonly hostId: string;
  readonly taskId: string;
  readonly buildId: string;
  readonly index: number;
  readonly key: string;
  /** The layer of the line before (null for the first line built on the base image). */
  readonly parent: string | null;
}

/**
 * The build layer cache: which layers a build can reuse, and writing new ones. A layer is a disk
 * snapshot carrying `layer_key`. Here a build's keys are computed (with `layer-key.ts`), layers
 * looked up, their retention extended and new ones written; `BuildService` runs the lines in the
 * build VM and keeps the build's record, and asks this class for nothing else.
 *
 * A key is written only together with `ready` (see {@link takeSnapshot}), so a lookup never finds
 * a half-written layer; an expired layer is never a hit (`SnapshotsRepo.findLayer`).
 */
export class LayerCache {
  constructor(
    private readonly snapshots: SnapshotsRepo,
    private readonly hosts: HostService,
    private readonly agents: Agents,
    private readonly macKey: Buffer,
    /** How long a layer is kept after it was last written or used (its `retention_until`). */
    private readonly retentionMs: number,
    private readonly metrics?: OrchdMetrics,
  ) {}

  /**
   * The keys for every (arch, base digest) the healthy hosts with the image offer, and the one whose
   * cached prefix is longest (with `no_cache`, none is looked up). Cache hits get their retention
   * extended; one that is no longer `ready` ends the prefix.
   */
  async plan(req: CreateBuildRequest, image: string, secrets: ReadonlyMap<string, string>): Promise<Plan> {
    const all = (await this.hosts.list()).filter((h) => h.kind === 'microvm');
    const withImage = all.filter((h) => h.images.includes(image));
    if (withImage.length === 0) {
      throw OrchError.invalid(`image "${image}" is on no microvm host; nothing can build from it`, {
        field: 'spec.image',
      });
    }
    const usable = withImage.filter((h) => h.state === 'active' && h.health === 'healthy');
    if (usable.length === 0) {
      throw new OrchError(
        'unavailable',
        `no active, healthy host has image "${image}" (${withImage.map((h) => `${h.id}: ${h.state}, ${h.health}`).join('; ')})`,
      );
    }
    const now = new Date();
    let best: Plan | undefined;
    const seen = new Set<string>();
    for (const host of [...usable].sort((a, b) => (a.id < b.id ? -1 : 1))) {
      const on = this.keysOn(host, image, req, secrets);
      if (!on) continue;
      if (seen.has(`${host.arch} ${on.digest}`)) continue;
      seen.add(`${host.arch} ${on.digest}`);
      const hits: SnapshotRow[] = [];
      if (!req.no_cache) {
        for (const key of on.keys) {
          const layer = await this.snapshots.findLayer(key, host.arch, now);
          if (!layer) break;
          hits.push(layer);
        }
      }
      if (!best || hits.length > best.hits.length) best = { host, arch: host.arch, ...on, hits };
    }
    if (!best) {
      throw new OrchError(
        'unavailable',
        `no host reports a digest for image "${image}"; layer keys start from it (run orch-agent setup again on ${usable.map((h) => h.id).join(', ')})`,
      );
    }
    const until = new Date(now.getTime() + this.retentionMs);
    const kept: SnapshotRow[] = [];
    for (const hit of best.hits) {
      if (!(await this.snapshots.keepLayer(hit.id, until))) break;
      kept.push(hit);
    }
    const host =
      kept.length > 0 ? (usable.find((h) => h.id === kept.at(-1)!.host_id) ?? best.host) : best.host;
    return { ...best, host, hits: kept };
  }

  /**
   * The keys of the build's lines on `host`: they start from its digest of the base image and its
   * arch (undefined when it reports no digest for the image). Secret values go in as MACs only.
   */
  keysOn(
    host: Host,
    image: string,
    req: CreateBuildRequest,
    secrets: ReadonlyMap<string, string>,
  ): { digest: string; keys: string[] } | undefined {
    const digest = host.image_details.find((d) => d.name === image)?.digest;
    if (!digest) return undefined;
    const keys = layerKeys(
      {
        baseDigest: digest,
        arch: host.arch,
        storageGb: req.spec.storage_gb,
        workspace: req.workspace,
        env: BUILD_LINE_ENV,
        secretMacs: secretMacs(this.macKey, secrets),
      },
      req.setup,
    );
    return { digest, keys };
  }

  /**
   * Snapshots the build VM's disk as the layer of line `index`: the record is written `creating`
   * without a key, and gets its key only together with `ready` and the artifact's digest. Answers
   * the layer's snapshot id; a failed snapshot is recorded `error` and its error thrown.
   */
  async write(layer: NewLayer): Promise<string> {
    const taken = await takeSnapshot(
      { agents: this.agents, repo: this.snapshots, metrics: this.metrics },
      {
        vm_id: layer.vmId,
        task_id: layer.taskId,
        host_id: layer.hostId,
        parent_snapshot_id: layer.parent,
        mode: 'build',
        comment: `build ${layer.buildId}, setup line ${layer.index + 1}`,
        requested_live: false,
        retention_until: new Date(Date.now() + this.retentionMs),
      },
      () => ({ layer_key: layer.key }),
    );
    if (!taken.ok) throw taken.error;
    return taken.id;
  }
}
