import { z } from 'zod';
import { AgentGpu, AgentImage, ARCHES, HOST_KINDS, Resources } from './agent.js';
import { AgentGpuDevice, AgentGpuStatus } from './gpu.js';
import { HOST_ID, HOST_ID_RULE, headerToken, text } from './text.js';

export { HOST_ID };

/** `POST /v1/hosts`. `agent_token` defaults to `MICROVM_AGENT_TOKEN` for microvm hosts. */
export const RegisterHostRequest = z
  .strictObject({
    id: z.string().regex(HOST_ID, `must be ${HOST_ID_RULE}`).optional(),
    kind: z.enum(HOST_KINDS),
    agent_url: text(2048, 1),
    agent_token: headerToken(4096).optional(),
    labels: z.record(text(63), text(255)).default({}),
  })
  .meta({ id: 'RegisterHostRequest' });
export type RegisterHostRequest = z.infer<typeof RegisterHostRequest>;

/** `active` hosts take new environments; `cordoned` ones keep what they run and take nothing new. */
export const HOST_STATES = ['active', 'cordoned'] as const;
/** Last contact: `healthy`; `unreachable` (no answer); `unauthorized` (agent refused the token); `error` (bad answer). */
export const HOST_HEALTH = ['healthy', 'unreachable', 'unauthorized', 'error'] as const;

/** A registered host as `GET /v1/hosts` returns it. Never carries the agent token. */
export const Host = z
  .object({
    id: z.string(),
    kind: z.enum(HOST_KINDS),
    agent_url: z.string(),
    token_source: z.enum(['registered', 'default']),
    arch: z.enum(ARCHES),
    version: z.string(),
    accelerator: z.string(),
    state: z.enum(HOST_STATES),
    health: z.enum(HOST_HEALTH),
    health_detail: z.string().nullable(),
    capacity: Resources,
    free: Resources,
    images: z.array(z.string()),
    /** The images with size, digest and source, as the agent's `/v1/info` lists them. */
    image_details: z.array(AgentImage).default([]),
    gpus: z.array(AgentGpu),
    /** Each GPU as the agent detected it at the last health check that reached it. */
    gpu_devices: z.array(AgentGpuDevice).default([]),
    /** GPU detection and passthrough state at that check (null: the agent reports none). */
    gpu_status: AgentGpuStatus.nullable().default(null),
    labels: z.record(z.string(), z.string()),
    last_seen_at: z.iso.datetime().nullable(),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: 'Host' });
export type Host = z.infer<typeof Host>;

export const HostList = z.object({ hosts: z.array(Host) }).meta({ id: 'HostList' });
export type HostList = z.infer<typeof HostList>;

/** `?action=` of `POST /v1/hosts/{id}`: `drain` cordons, then moves running environments away (moves.ts). */
export const HostAction = z.strictObject({ action: z.enum(['cordon', 'uncordon', 'drain']) });

/**
 * `GET /v1/hosts/{id}/capacity?minutes=N`: the host's capacity over the last N minutes (1-1440,
 * default 60), from the free resources its agent reported at each health check.
 */
export const HostCapacityQuery = z.strictObject({
  minutes: z
    .string()
    .regex(/^\d{1,4}$/, 'must be a whole number of minutes')
    .transform(Number)
    .pipe(z.number().int().min(1).max(1440))
    .optional()
    .describe('how far back, in minutes (1-1440, default 60)'),
});

/** One point of a host's capacity history: the least free in its bucket (the busiest moment). */
export const HostCapacitySample = z
  .object({ at: z.iso.datetime(), capacity: Resources, free: Resources })
  .meta({ id: 'HostCapacitySample' });
export type HostCapacitySample = z.infer<typeof HostCapacitySample>;

/** A host's capacity history: at most 120 points, each the bucket of `bucket_seconds` that starts at `at`. */
export const HostCapacityHistory = z
  .object({
    host_id: z.string(),
    minutes: z.number().int(),
    bucket_seconds: z.number().int(),
    samples: z.array(HostCapacitySample),
  })
  .meta({ id: 'HostCapacityHistory' });
export type HostCapacityHistory = z.infer<typeof HostCapacityHistory>;
