import { type Command, Option } from 'commander';
import type { z } from 'zod';

/**
 * One option of a program, declared once: where it is read from (environment variable and,
 * usually, a command-line flag), how its text is validated and converted (a zod schema, which
 * also holds the default), and what it means (`--help`). This record is the model of every
 * program's `config.ts`.
 */
export interface OptionDeclaration<S extends z.ZodType = z.ZodType> {
  /** Environment variable, e.g. `BOARD_PORT`. */
  readonly env: string;
  /** Older variable names still read (after `env`), e.g. before a rename. */
  readonly envAliases?: readonly string[];
  /** Commander flag syntax, e.g. `--port <port>`; absent for settings read only from the environment (secrets). */
  readonly flag?: string;
  /** Parses the raw text (`undefined` when unset); `.default()` on it is the default. */
  readonly schema: S;
  /** One line for `--help`. */
  readonly description: string;
  /** The value is never shown (not even its default). */
  readonly secret?: boolean;
}

/** A program's option record: key (the config field) to declaration. */
export type OptionDeclarations = Readonly<Record<string, OptionDeclaration>>;

/** The validated values of a declaration record. */
export type OptionValues<D extends OptionDeclarations> = {
  -readonly [K in keyof D]: z.output<D[K]['schema']>;
};

/** Raw option text as given on the command line, by key. */
export type RawOptions<D extends OptionDeclarations> = { [K in keyof D]?: string | undefined };

/** Where option values come from: flags win over the environment, which wins over defaults. */
export interface OptionSources<D extends OptionDeclarations> {
  readonly flags?: RawOptions<D>;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** Reports a problem involving some options (cross-checks), named the way users see them. */
export type ReportProblem<D extends OptionDeclarations> = (
  keys: keyof D | (keyof D)[],
  message: string,
) => void;

/**
 * The one configuration error of every program: every problem found, one sentence each. The
 * programs' `runMain` prints it and exits with status 2.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly problems: readonly string[];

  constructor(problems: string | readonly string[]) {
    const list = typeof problems === 'string' ? [problems] : problems;
    super(`invalid configuration:\n${list.map((p) => `  - ${p}`).join('\n')}`);
    this.problems = list;
  }
}

/**
 * Declares a program's options (identity at run time; keeps the literal types).
 * @example
 * export const OPTIONS = declareOptions({
 *   port: { env: 'BOARD_PORT', flag: '--port <port>', schema: portSchema(8787), description: 'TCP port' },
 * });
 */
export function declareOptions<const D extends OptionDeclarations>(declarations: D): D {
  return declarations;
}

/** How an option is named in messages: `BOARD_PORT (--port)`. */
export function optionLabel(d: OptionDeclaration): string {
  const flag = d.flag?.split(/[ ,]/)[0];
  return flag ? `${d.env} (${flag})` : d.env;
}

/**
 * Reads every option (flags over environment over defaults), validates each with its schema,
 * runs the cross-checks (given the values that passed, and the raw text of all), and throws one
 * {@link ConfigError} listing every problem found.
 * An empty environment variable counts as unset.
 * @example
 * const config = loadOptions(OPTIONS, { flags, env: process.env }, (v, problem) => {
 *   if (v.auth === 'on' && v.tokenSecret === undefined) problem(['auth', 'tokenSecret'], 'a secret is required when auth is on');
 * });
 */
export function loadOptions<D extends OptionDeclarations>(
  declarations: D,
  sources: OptionSources<D>,
  check?: (
    values: Partial<OptionValues<D>>,
    problem: ReportProblem<D>,
    raw: { readonly [K in keyof D]: string | undefined },
  ) => void,
): OptionValues<D> {
  const problems: string[] = [];
  const values: Record<string, unknown> = {};
  const raws: Record<string, string | undefined> = {};
  for (const [key, d] of Object.entries(declarations)) {
    const raw = rawValue(d, sources.flags?.[key as keyof D], sources.env);
    raws[key] = raw;
    const parsed = d.schema.safeParse(raw);
    if (parsed.success) values[key] = parsed.data;
    else for (const issue of parsed.error.issues) problems.push(`${optionLabel(d)}: ${issue.message}`);
  }
  check?.(
    values as Partial<OptionValues<D>>,
    (keys, message) => {
      const list = (Array.isArray(keys) ? keys : [keys]) as string[];
      const names = list.map((k) => declarations[k]).filter((d): d is OptionDeclaration => d !== undefined);
      problems.push(names.length > 0 ? `${names.map(optionLabel).join(', ')}: ${message}` : message);
    },
    raws as { [K in keyof D]: string | undefined },
  );
  if (problems.length > 0) throw new ConfigError(problems);
  return values as OptionValues<D>;
}

function rawValue(
  d: OptionDeclaration,
  fromFlag: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  if (fromFlag !== undefined) return fromFlag;
  for (const name of [d.env, ...(d.envAliases ?? [])]) {
    const v = env[name];
    if (v !== undefined && v !== '') return v;
  }
  return undefined;
}

/** The default of a declaration as `--help` shows it; undefined when none or secret. */
export function defaultText(d: OptionDeclaration): string | undefined {
  if (d.secret) return undefined;
  const parsed = d.schema.safeParse(undefined);
  if (!parsed.success || parsed.data === undefined || parsed.data === '') return undefined;
  return Array.isArray(parsed.data) ? parsed.data.join(',') : String(parsed.data);
}

const attributeNames = new WeakMap<Command, Map<string, string>>();

/**
 * Adds a flag for every declared option to a commander command, with a help line showing the
 * default and the environment variable; options read only from the environment are listed after
 * the flags. Read the values back with {@link flagValues}.
 */
export function addOptions<D extends OptionDeclarations>(cmd: Command, declarations: D): Command {
  const names = attributeNames.get(cmd) ?? new Map<string, string>();
  attributeNames.set(cmd, names);
  const envOnly: string[] = [];
  for (const [key, d] of Object.entries(declarations)) {
    const dflt = defaultText(d);
    const text = `${d.description}${dflt !== undefined ? ` (default: ${dflt})` : ''}`;
    if (!d.flag) {
      envOnly.push(`  ${d.env}\n      ${text}`);
      continue;
    }
    const option = new Option(d.flag, `${text} [env ${d.env}]`);
    names.set(key, option.attributeName());
    cmd.addOption(option);
  }
  const envHelp =
    envOnly.length > 0 ? `\nSettings read from the environment only:\n${envOnly.join('\n')}\n` : '';
  cmd.addHelpText(
    'after',
    `${envHelp}\nFlags win over environment variables; an empty variable counts as unset.\n`,
  );
  return cmd;
}

/** The raw text of the declared flags given to `cmd` (or to a parent command). */
export function flagValues<D extends OptionDeclarations>(cmd: Command, declarations: D): RawOptions<D> {
  const given = cmd.optsWithGlobals() as Record<string, unknown>;
  const out: Record<string, string | undefined> = {};
  for (const [key, d] of Object.entries(declarations)) {
    if (!d.flag) continue;
    let attr: string | undefined;
    for (let c: Command | null = cmd; c && attr === undefined; c = c.parent) {
      attr = attributeNames.get(c)?.get(key);
    }
    const v = given[attr ?? new Option(d.flag).attributeName()];
    if (typeof v === 'string') out[key] = v;
  }
  return out as RawOptions<D>;
}
