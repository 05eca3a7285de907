import { metricsAnswer } from '@support/server';
import type { OrchdMetrics } from '../../metrics.js';
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
