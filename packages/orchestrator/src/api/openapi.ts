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
  for (const r of routes) {
    const parameters = [...pathParams(r.params, schemas), ...queryParams(r.query, schemas)];
    paths[r.path] ??= {};
    paths[r.path]![r.method.toLowerCase()] = {
      summary: r.summary,
      tags: [r.tag],
      'x-access': r.access,
      ...(r.access === 'public' ? { security: [] } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      // A body read only for some `?action=` values (bodyWhen) is optional in the document.
      ...(r.body ? { requestBody: { required: !r.bodyWhen, content: json(r.body, 'input') } } : {}),
      responses: {
        [r.success.status]: {
          description: r.success.description,
          ...(r.success.schema ? { content: json(r.success.schema, 'output') } : {}),
        },
        default: { description: 'Error envelope', content: errorContent },
      },
    };
  }
  return {
    openapi: '3.0.3',
    info: {
      title: 'orchd',
      version: '1',
      description: 'The orchestrator API. Errors are { error: { code, message, details? } }.',
    },
    components: {
      schemas: schemas.components,
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
