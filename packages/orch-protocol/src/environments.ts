import { z } from 'zod';
import { AGENT_VM_STATES, ExposePort, VmSpec } from './agent-vms.js';
import { MAX_EXPOSE, MAX_MANIFEST_INLINE, MAX_STARTUP_SCRIPT } from './rules.js';
import { ServiceStatus } from './services.js';
import { agentId, base64Text, hostId, secretValues, taskId, text } from './text.js';

/**
 * `expose[].as` is unique across entries (environment-definition.md): each repeat after the first,
 * as `[index, message]`.
 */
function repeatedExposeNames(expose: readonly { readonly as: string }[]): [number, string][] {
  const first = new Map<string, number>();
  const repeats: [number, string][] = [];
  expose.forEach((entry, i) => {
    const at = first.get(entry.as);
    if (at === undefined) first.set(entry.as, i);
    else
      repeats.push([
        i,
        `${JSON.stringify(entry.as)} is already the name of expose[${at}]; names must be unique`,
      ]);
  });
  return repeats;
}

/**
 * `POST /v1/environments`: the compiled request as `orch up` posts it (orchestrator.md, "Compiled
 * environment request"): `secrets` holds values for the manifest's secret references;
 * `required_secrets` (compile output only) is accepted and ignored so that `orch compile --format
 * json` output can be posted as is.
 */
export const CreateEnvironmentRequest = z
  .strictObject({
    task_id: taskId(),
    spec: VmSpec,
    manifest_inline: base64Text(MAX_MANIFEST_INLINE, 1),
    secrets: secretValues(64 * 1024).default({}),
    startup_script: text(MAX_STARTUP_SCRIPT),
    expose: z
      .array(ExposePort)
      .max(MAX_EXPOSE)
      .check((ctx) => {
        for (const [i, message] of repeatedExposeNames(ctx.value))
          ctx.issues.push({ code: 'custom', message, input: ctx.value[i]?.as, path: [i, 'as'] });
      })
      .default([]),
    required_secrets: z.array(text(128)).max(1024).optional(),
    seed_snapshot_id: agentId().optional(),
  })
  .meta({ id: 'CreateEnvironmentRequest' });
export type CreateEnvironmentRequest = z.infer<typeof CreateEnvironmentRequest>;

/**
 * Environment states: the states of its VM on the agent ({@link AGENT_VM_STATES}), named the same;
 * the moves between them differ (`ENVIRONMENT_TRANSITIONS` and `AGENT_VM_TRANSITIONS`,
 * transitions.ts). CPU and RAM are held in `creating`, `running`, `pausing`, `resuming` and
 * `stopping`; a `paused` environment holds only its disk (its VM's disk and saved memory on its
 * host); `stopped` and `error` hold nothing.
 */
export const ENVIRONMENT_STATES = AGENT_VM_STATES;
export type EnvironmentState = (typeof ENVIRONMENT_STATES)[number];

export const Environment = z
  .object({
    id: z.string(),
    task_id: z.string(),
    state: z.enum(ENVIRONMENT_STATES),
    host_id: z.string(),
    spec: VmSpec,
    expose: z.array(ExposePort),
    /** Each exposed guest port with the host address and port that reach it (once running). */
    ports: z.array(
      z.object({
        port: z.number().int(),
        as: z.string(),
        host: z.string(),
        host_port: z.number().int(),
        url: z.string(),
      }),
    ),
    /** Names of the secrets given at create; values are never returned. */
    secret_names: z.array(z.string()),
    seed_snapshot_id: z.string().nullable(),
    restored_from_snapshot_id: z.string().nullable(),
    last_error: z.string().nullable(),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
    started_at: z.iso.datetime().nullable(),
    expires_at: z.iso.datetime().nullable(),
    stopped_at: z.iso.datetime().nullable(),
    /** The manifest's services and their state, refreshed from the agent while the VM runs. */
    services: z.array(ServiceStatus),
    /** The last move to another host (drain): where from, where to, the downtime, when. */
    last_move: z
      .object({
        from_host_id: z.string(),
        to_host_id: z.string(),
        downtime_ms: z.number().int(),
        at: z.iso.datetime(),
      })
      .nullable()
      .optional(),
  })
  .meta({ id: 'Environment' });
export type Environment = z.infer<typeof Environment>;

export const EnvironmentList = z
  .object({ environments: z.array(Environment) })
  .meta({ id: 'EnvironmentList' });

export const EnvironmentListQuery = z.strictObject({
  state: z.enum(ENVIRONMENT_STATES).optional(),
  task_id: text(128).optional(),
  host_id: hostId().optional(),
});

/**
 * The `?action=` values of `POST /v1/environments/{id}`: `exec` (master; body ExecRequest, answer
 * ExecResult), `pause` and `resume` (any authenticated caller; no body, answer the Environment).
 */
export const EnvironmentAction = z.strictObject({ action: z.enum(['exec', 'pause', 'resume']) });
