import {
  Host,
  HostAction,
  HostCapacityHistory,
  HostCapacityQuery,
  HostDrain,
  HostList,
  hostId,
  RegisterHostRequest,
} from '@orch/protocol';
import { z } from 'zod';
import type { MoveService } from '../../environments/move-service.js';
import type { HostService } from '../../hosts/host-service.js';
import { type AnyRoute, route } from '../route.js';

/** Host ids are {@link HOST_ID}s; any other `{id}` is `404 not_found` before anything is looked up. */
const IdParam = z.object({ id: hostId() });

/** `/v1/hosts`: register (master), read (anyone authenticated), cordon/uncordon and delete (master). */
export function hostRoutes(hosts: HostService, moves: MoveService): AnyRoute[] {
  return [
    route({
      method: 'POST',
      path: '/v1/hosts',
      access: 'master',
      tag: 'hosts',
      summary: 'Register a host agent, or replace the provider details of an existing host id',
      body: RegisterHostRequest,
      success: { status: 201, schema: Host, description: 'Registered (201 new, 200 replaced)' },
      handler: async ({ body }) => {
        const { host, created } = await hosts.register(body);
        return { status: created ? 201 : 200, body: host };
      },
    }),
    route({
      method: 'GET',
      path: '/v1/hosts',
      access: 'authenticated',
      tag: 'hosts',
      summary: 'List hosts with topology, capacity, state and health',
      success: { status: 200, schema: HostList, description: 'All hosts, by id' },
      handler: async () => ({ status: 200, body: { hosts: await hosts.list() } }),
    }),
    route({
      method: 'GET',
      path: '/v1/hosts/{id}',
      access: 'authenticated',
      tag: 'hosts',
      summary: 'Read one host',
      params: IdParam,
      success: { status: 200, schema: Host, description: 'The host' },
      handler: async ({ params }) => ({ status: 200, body: await hosts.get(params.id) }),
    }),
    route({
      method: 'GET',
      path: '/v1/hosts/{id}/capacity',
      access: 'authenticated',
      tag: 'hosts',
      summary:
        'Capacity over the last ?minutes= (1-1440, default 60), from what the agent reported at each health check: at most 120 points, each the least free in its bucket',
      params: IdParam,
      query: HostCapacityQuery,
      success: { status: 200, schema: HostCapacityHistory, description: 'The capacity history' },
      handler: async ({ params, query }) => ({
        status: 200,
        body: await hosts.capacityHistory(params.id, query.minutes ?? 60),
      }),
    }),
    route({
      method: 'POST',
      path: '/v1/hosts/{id}',
      access: 'master',
      tag: 'hosts',
      summary:
        'Cordon (take no new environments), uncordon, or drain a host (cordon, then move its running environments to other hosts by live snapshot): ?action=cordon|uncordon|drain',
      params: IdParam,
      query: HostAction,
      success: {
        status: 200,
        schema: z.union([Host, HostDrain]),
        description:
          'cordon/uncordon: the host in its new state; drain: the host, the moves started and what cannot move',
      },
      handler: async ({ params, query }) => ({
        status: 200,
        body:
          query.action === 'drain'
            ? await moves.drain(params.id)
            : await hosts.setState(params.id, query.action === 'cordon' ? 'cordoned' : 'active'),
      }),
    }),
    route({
      method: 'DELETE',
      path: '/v1/hosts/{id}',
      access: 'master',
      tag: 'hosts',
      summary: 'Remove a host',
      params: IdParam,
      success: { status: 204, description: 'Removed' },
      handler: async ({ params }) => {
        await hosts.remove(params.id);
        return { status: 204 };
      },
    }),
  ];
}
