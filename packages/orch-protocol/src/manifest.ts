import { z } from 'zod';
import {
  envNameProblem,
  MANIFEST_VERSION,
  SPEC_LIMITS,
  serviceImageProblem,
  serviceNameProblem,
  workspaceProblem,
} from './rules.js';
import { SECRET_NAME, SECRET_NAME_RULE, text } from './text.js';

export { MANIFEST_VERSION, workspaceProblem } from './rules.js';

/**
 * The manifest (orchestrator.md, "Manifest (decoded shape)"): what `manifest_inline` holds, base64
 * of this JSON. `orch compile` writes it from the definition file; orchd checks it at create and
 * the agent again before it runs the services. Closed like the definition file it comes from: an
 * unknown field is refused.
 */

/** A field holding a guest workspace path ({@link workspaceProblem}, the text rule included). */
export const workspacePath = () =>
  z.string().check((ctx) => {
    const problem = workspaceProblem(ctx.value);
    if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
  });

/** An env entry's long form: a literal `{ value }` or a secret reference `{ secret }`. */
const EnvReference = z.strictObject({
  value: text(512 * 1024).optional(),
  secret: z.string().regex(SECRET_NAME, `must be a secret name: ${SECRET_NAME_RULE}`).optional(),
});

/**
 * A service's env: variable name ({@link envNameProblem}, the definition file's rule) to a literal
 * or `{ value }` or `{ secret }`, never both (checked on the record, so that the message names the
 * entry rather than "no member of the union fits").
 */
const ServiceEnv = z
  .record(
    z.string(),
    // A literal keeps the text rule: a NUL cannot reach a process environment, so it is refused.
    z.union([text(512 * 1024), EnvReference], {
      error: 'must be a string, { value: <string> } or { secret: <name> }',
    }),
  )
  .check((ctx) => {
    for (const [name, entry] of Object.entries(ctx.value)) {
      const problem = envNameProblem(name);
      if (problem) ctx.issues.push({ code: 'custom', message: problem, input: name, path: [name] });
      if (typeof entry === 'string') continue;
      const both = entry.value !== undefined && entry.secret !== undefined;
      if (both || (entry.value === undefined && entry.secret === undefined))
        ctx.issues.push({
          code: 'custom',
          message: both ? 'sets both value and secret: keep one' : 'needs "value" or "secret"',
          input: entry,
          path: [name],
        });
    }
  });

/**
 * `services`, keyed by service names ({@link serviceNameProblem}, the definition file's rule):
 * a name outside it is an issue at `services.<name>`; each `image` names an agent image
 * ({@link serviceImageProblem}, the definition file's rule too).
 */
const Services = z
  .record(
    z.string(),
    z.strictObject({
      image: z.string().check((ctx) => {
        const problem = serviceImageProblem(ctx.value);
        if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
      }),
      ports: z.array(z.number().int().min(SPEC_LIMITS.port.min).max(SPEC_LIMITS.port.max)).optional(),
      env: ServiceEnv.optional(),
    }),
  )
  .check((ctx) => {
    for (const name of Object.keys(ctx.value)) {
      const problem = serviceNameProblem(name);
      if (problem) ctx.issues.push({ code: 'custom', message: problem, input: name, path: [name] });
    }
  });

/** The decoded manifest. */
export const Manifest = z.strictObject({
  version: z.literal(MANIFEST_VERSION, {
    error: `must be "${MANIFEST_VERSION}", the only manifest version`,
  }),
  machine: z.strictObject({ workspace: workspacePath() }).optional(),
  services: Services.optional(),
});
export type Manifest = z.infer<typeof Manifest>;
