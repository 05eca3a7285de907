import { ErrorBody } from '@orch/protocol';
import { z } from 'zod';
import type { AnyRoute } from './route.js';

/** Converts zod schemas to OpenAPI 3.0 JSON Schema; named schemas (`.meta({ id })`) go to components. */
class SchemaConverter {
  readonly components: Record<string, unknown> = {};

  convert(schema: z.ZodType, io: 'input' | 'output'): unknown {
    const js = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'openapi-3.0' }) as Record<
      string,
      unknown
    >;
    const defs = { ...(js.definitions as object), ...(js.$defs as object) } as Record<string, unknown>;
    delete js.definitions;
    delete js.$defs;
    for (const [name, def] of Object.entries(defs)) this.components[name] ??= relink(def);
    return relink(js);
  }

  json(schema: z.ZodType, io: 'input' | 'output') {
    return { 'application/json': { schema: this.convert(schema, io) } };
  }
}

function relink(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value).replace(/"#\/(definitions|\$defs)\//g, '"#/components/schemas/'));
}

/**
 * `GET /v1/openapi.json`: generated from the route table, so it describes exactly the routes the
 * server registers, with the same zod schemas it validates with.
 */
export function openApiDocument(routes: readonly AnyRoute[]): object {
  const schemas = new SchemaConverter();
  const json = schemas.json.bind(schemas);
  const errorContent = json(ErrorBody, 'output');
  const paths: Record<string, Record<string, object>> = {};
  const operationIds = new Set<string>();
  for (const r of routes) {
    const parameters = [
      ...pathParams(r.params, schemas),
      ...queryParams(r.query, schemas),
      ...Object.entries(r.headers ?? {}).map(([name, h]) => ({
        name,
        in: 'header',
        required: false,
        description: h.description,
        schema: schemas.convert(h.schema, 'input'),
      })),
    ];
    const operationId = r.operationId ?? deriveOperationId(r.method, r.path);
    if (operationIds.has(operationId)) throw new Error(`duplicate operationId ${operationId}`);
    operationIds.add(operationId);
    const success = r.websocket
      ? {
          101: {
            description: `${r.success.description}. Upgraded to a WebSocket (\`Connection: Upgrade\`, \`Upgrade: websocket\`); binary frames carry the console bytes both ways.`,
          },
        }
      : {
          [r.success.status]: {
            description: r.success.description,
            ...(r.success.schema ? { content: json(r.success.schema, 'output') } : {}),
            ...(r.success.mediaType
              ? { content: { [r.success.mediaType]: { schema: { type: 'string' } } } }
              : {}),
          },
        };
    const errors = Object.fromEntries(
      errorStatuses(r).map((status) => [status, { $ref: `#/components/responses/Error${status}` }]),
    );
    paths[r.path] ??= {};
    paths[r.path]![r.method.toLowerCase()] = {
      operationId,
      summary: r.summary,
      tags: [r.tag],
      'x-access': r.access,
      ...(r.access === 'public' ? { security: [] } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      // A body read only for some `?action=` values (bodyWhen) is optional in the document.
      ...(r.body ? { requestBody: { required: !r.bodyWhen, content: json(r.body, 'input') } } : {}),
      responses: { ...success, ...errors },
    };
  }
  return {
    openapi: '3.0.3',
    info: {
      title: 'orchd',
      version: '1',
      description:
        'The orchestrator API. Every 4xx/5xx answer is the error envelope { error: { code, message, details? } }; every answer carries x-request-id.',
    },
    servers: [
      {
        url: '{origin}',
        description: 'The orchd you run (the API is served at the root of its origin)',
        variables: {
          origin: { default: 'http://127.0.0.1:8080', description: 'scheme, host and port of orchd' },
        },
      },
    ],
    tags: [...new Set(routes.map((r) => r.tag))].sort().map((name) => ({ name })),
    components: {
      schemas: schemas.components,
      responses: Object.fromEntries(
        Object.entries(ERROR_MEANINGS).map(([status, description]) => [
          `Error${status}`,
          { description: `${description} (error envelope)`, content: errorContent },
        ]),
      ),
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer' },
        session: { type: 'apiKey', in: 'cookie', name: 'orch_session' },
      },
    },
    security: [{ bearer: [] }, { session: [] }],
    paths,
  };
}

/** Path parameters with their schemas (the id patterns the server checks, a 404 when not met). */
function pathParams(schema: z.ZodType | undefined, schemas: SchemaConverter): object[] {
  if (!(schema instanceof z.ZodObject)) return [];
  return Object.entries(schema.shape as Record<string, z.ZodType>).map(([name, s]) => ({
    name,
    in: 'path',
    required: true,
    schema: schemas.convert(s, 'input'),
  }));
}

function queryParams(schema: z.ZodType | undefined, schemas: SchemaConverter): object[] {
  if (!(schema instanceof z.ZodObject)) return [];
  return Object.entries(schema.shape as Record<string, z.ZodType>).map(([name, s]) => ({
    name,
    in: 'query',
    required: !s.safeParse(undefined).success,
    schema: schemas.convert(s, 'input'),
  }));
}

/** What each documented error status means here (each answers the error envelope). */
const ERROR_MEANINGS: Record<number, string> = {
  400: 'invalid_argument: a malformed body, query or request',
  401: 'unauthorized: missing or invalid credentials',
  403: 'forbidden (address outside ORCH_ALLOWED_CIDRS, a cross-site request) or master-only route',
  404: 'not_found: no such resource, or a path id outside its pattern',
  409: 'conflict: the resource is not in a state that allows this',
  413: 'invalid_argument: the request body is larger than 1 MiB',
  426: 'invalid_argument: this route is a WebSocket; send Upgrade: websocket',
  429: 'unavailable: too many failed logins; try again after Retry-After seconds',
  500: 'internal: an unexpected failure (details are logged, not returned)',
  501: 'unimplemented: needs a database (DATABASE_URL)',
  503: 'unavailable: the store or an agent cannot be reached or failed',
};

/** The error statuses a route can answer, from what it takes and who may call it. */
function errorStatuses(r: AnyRoute): number[] {
  const statuses = new Set([400, 403, 500, 503]);
  if (r.access !== 'public') statuses.add(401);
  if (r.params || r.path.startsWith('/v1/')) statuses.add(404);
  if (r.body) statuses.add(413);
  if (r.method !== 'GET' && /^\/v1\/(environments|snapshots|hosts)/.test(r.path)) statuses.add(409);
  if (r.websocket) statuses.add(426);
  for (const status of r.errors ?? []) statuses.add(status);
  if (r.path.startsWith('/v1/api-keys')) statuses.add(501);
  return [...statuses].sort((a, b) => a - b);
}

/**
 * An `operationId` from method and path: `GET /v1/hosts/{id}` -> `getHostsById`,
 * `POST /v1/environments/{id}/snapshots` -> `postEnvironmentsByIdSnapshots`, `GET /metrics` ->
 * `getMetrics`. Unique because method and path are.
 */
export function deriveOperationId(method: string, path: string): string {
  const words = path
    .split('/')
    .filter((seg) => seg !== '' && seg !== 'v1')
    .flatMap((seg) => {
      const param = /^\{(\w+)\}$/.exec(seg);
      return param ? ['by', param[1]!] : seg.split(/[^A-Za-z0-9]+/);
    })
    .filter((w) => w !== '');
  return [method.toLowerCase(), ...words.map((w) => w[0]!.toUpperCase() + w.slice(1))].join('');
}
