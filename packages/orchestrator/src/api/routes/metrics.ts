import { metricsAnswer } from '@support/server';
import { z } from 'zod';
import type { OrchdMetrics } from '../../metrics.js';
import { ORCHD_VERSION } from '../../version.js';
import { type AnyRoute, route } from '../route.js';

/**
 * `GET /metrics`: Prometheus text exposition. Same access as the API (any authenticated caller:
 * master token, API key or session, after the CIDR allowlist), so a scraper is given an API key
 * (`authorization: Bearer orch_key_...` in its scrape config).
 */
export function metricsRoute(metrics: OrchdMetrics): AnyRoute {
  return route({
    method: 'GET',
    path: '/metrics',
    access: 'authenticated',
    tag: 'meta',
    summary: 'Prometheus metrics (text exposition format)',
    success: { status: 200, mediaType: 'text/plain', description: 'Prometheus text format 0.0.4' },
    handler: async () => {
      const { contentType, body } = await metricsAnswer(metrics.registry);
      return { status: 200, text: body, headers: { 'content-type': contentType } };
    },
  });
}

/** `GET /v1/info`'s answer: which program answers and its version. */
export const OrchdInfo = z
  .object({ service: z.literal('orchd'), version: z.string() })
  .meta({ id: 'OrchdInfo' });

/**
 * `GET /v1/info`: `{service: "orchd", version}` (the package's version), without authentication
 * like `/v1/openapi.json`: a probe or an operator checking what runs needs no credential, and the
 * version is no secret (the CIDR allowlist still applies).
 */
export function infoRoute(): AnyRoute {
  return route({
    method: 'GET',
    path: '/v1/info',
    access: 'public',
    tag: 'meta',
    summary: 'The program and its version',
    success: { status: 200, schema: OrchdInfo, description: 'orchd and its version' },
    handler: async () => ({ status: 200, body: { service: 'orchd', version: ORCHD_VERSION } }),
  });
}
