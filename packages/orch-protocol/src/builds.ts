import { z } from 'zod';
import { VmSpec } from './agent-vms.js';
import { workspacePath } from './manifest.js';
import { agentId, taskId, text } from './text.js';

/**
 * Builds (`POST /v1/builds`): the definition's `setup:` lines run in order, one build layer (a disk
 * snapshot carrying `layer_key`) per line; a line whose key matches a kept layer is `cached` and
 * is not run again. States:
 *
 *   running --every line cached or built--> ready   (artifact_snapshot_id = the last layer)
 *      +--a line failed / the build VM failed / orchd stopped--> failed
 *
 * Steps: pending -> cached | running -> built | failed (a step after a failed one stays pending).
 */
export const BUILD_STATES = ['running', 'ready', 'failed'] as const;
export type BuildState = (typeof BUILD_STATES)[number];

export const BUILD_STEP_STATES = ['pending', 'cached', 'running', 'built', 'failed'] as const;
export type BuildStepState = (typeof BUILD_STEP_STATES)[number];

/** The version tag that starts every layer key's array; a new recipe gets a new tag. */
export const LAYER_KEY_SCHEME = 'orch-layer-v1';

/** Most setup lines one build takes (one layer, one disk snapshot each). */
export const MAX_BUILD_LINES = 256;

/**
 * `POST /v1/builds`: what `orch build` sends. `spec` is the compiled spec (only `image` and
 * `storage_gb` reach the layer keys; cpus and RAM size the build VM), `workspace` the manifest's
 * workspace (each line runs there), `setup` the definition's setup lines in order, `secrets` the
 * values of the definition's secret references (every line sees all of them).
 */
export const CreateBuildRequest = z
  .strictObject({
    task_id: taskId(),
    spec: VmSpec,
    workspace: workspacePath(),
    setup: z
      .array(text(64 * 1024, 1))
      .min(1)
      .max(MAX_BUILD_LINES),
    secrets: z.record(text(128), text(64 * 1024)).default({}),
    no_cache: z.boolean().default(false),
  })
  .meta({ id: 'CreateBuildRequest' });
export type CreateBuildRequest = z.infer<typeof CreateBuildRequest>;

/** One setup line of a build and what became of it. */
export const BuildStep = z
  .object({
    index: z.number().int(),
    line: z.string(),
    state: z.enum(BUILD_STEP_STATES),
    /** Hex sha256 layer key (see the orchestrator README, "Builds"); known before the step runs. */
    layer_key: z.string(),
    /** The layer's snapshot: the cached one, or the one this step wrote. */
    snapshot_id: z.string().nullable(),
    /** Run time of the line plus its snapshot (0 when cached). */
    duration_ms: z.number().int().nullable(),
    exit_code: z.number().int().nullable(),
    /** A failed line's output (stdout then stderr, its last 64 KiB), secret values replaced by `***`. */
    output: z.string().nullable(),
  })
  .meta({ id: 'BuildStep' });
export type BuildStep = z.infer<typeof BuildStep>;

export const Build = z
  .object({
    id: z.string(),
    task_id: z.string(),
    state: z.enum(BUILD_STATES),
    host_id: z.string().nullable(),
    arch: z.string().nullable(),
    /** The base image as asked (`spec.image`, default `busybox`) and the digest the keys start from. */
    base_image: z.string(),
    base_digest: z.string().nullable(),
    spec: VmSpec,
    workspace: z.string(),
    no_cache: z.boolean(),
    secret_names: z.array(z.string()),
    steps: z.array(BuildStep),
    /** The last layer: `orch up --from-build <artifact_snapshot_id>` boots it. Set once `ready`. */
    artifact_snapshot_id: z.string().nullable(),
    /** The environment that ran the build VM (null when every line was cached). */
    vm_id: z.string().nullable(),
    last_error: z.string().nullable(),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
    finished_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'Build' });
export type Build = z.infer<typeof Build>;

export const BuildList = z.object({ builds: z.array(Build) }).meta({ id: 'BuildList' });

export const BuildListQuery = z.strictObject({
  task_id: text(128).optional(),
  state: z.enum(BUILD_STATES).optional(),
});

export const BuildIdParam = z.object({ id: agentId() });
