import { Composer, type CST, type Document, Lexer, LineCounter, Parser, type YAMLError } from 'yaml';
import type { Diagnostic, Position } from './diagnostics.js';

/** Largest definition file accepted, in UTF-16 code units (about 1 MiB of text). */
export const MAX_SOURCE_LENGTH = 1 << 20;

/**
 * Deepest nesting of collections (mappings and lists, block or flow) accepted. A definition needs
 * five (`services` > a service > `env` > a variable > `{ value }`); the limit keeps the YAML
 * library's recursion and its work on deep trees small, whatever the input.
 */
export const MAX_NESTING = 64;

/** The tags of the YAML 1.2 core schema, the only ones a definition file may use. */
const CORE_TAGS = ['str', 'int', 'float', 'bool', 'null', 'seq', 'map'] as const;
const CORE_TAG_NAMES = new Set(CORE_TAGS.map((t) => `tag:yaml.org,2002:${t}`));
const CORE_TAG_LIST = CORE_TAGS.map((t) => `!!${t}`).join(', ');

// resolveKnownTags: false makes YAML 1.1's !!binary, !!omap, !!pairs, !!set and !!timestamp unknown tags too.
const PARSE_OPTIONS = { version: '1.2', uniqueKeys: false, merge: false, resolveKnownTags: false } as const;

/** A definition file parsed into a YAML syntax tree that knows where every node came from. */
export interface ParsedSource {
  readonly doc: Document.Parsed;
  /** Maps a source offset to its 1-based line and column. */
  readonly positionOf: (offset: number) => Position;
  /**
   * Problems in a tree that is still sound (an unknown or misapplied tag, a YAML warning): the
   * validator reports them together with its own, and the file does not compile.
   */
  readonly problems: readonly Diagnostic[];
}

/**
 * Parses definition-file text as one YAML 1.2 document (core schema). Syntax errors (including a
 * second document, a `%YAML` directive other than 1.2, and nesting deeper than
 * {@link MAX_NESTING}) come back as diagnostics; duplicate keys and tags outside the core schema are
 * left to the validator, which reports them together with every other problem. Never throws.
 */
export function parseSource(
  text: string,
):
  | { readonly ok: true; readonly parsed: ParsedSource }
  | { readonly ok: false; readonly diagnostics: Diagnostic[] } {
  if (text.length > MAX_SOURCE_LENGTH) {
    return {
      ok: false,
      diagnostics: [
        { line: 1, col: 1, message: `definition file is larger than ${MAX_SOURCE_LENGTH} characters` },
      ],
    };
  }
  const source = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const lineCounter = new LineCounter();
  const positionOf = (offset: number): Position => lineCounter.linePos(offset);
  const fail = (offset: number, message: string) => ({
    ok: false as const,
    diagnostics: [{ ...positionOf(offset), message }],
  });

  const tokens = tokenize(source, lineCounter);
  if ('tooDeepAt' in tokens) {
    return fail(tokens.tooDeepAt, `nesting deeper than ${MAX_NESTING} levels of mappings and lists`);
  }
  const { doc, secondDocAt } = compose(tokens.tokens, source.length);
  if (doc.directives.yaml.version !== '1.2') {
    const directive = tokens.tokens.find((t) => t.type === 'directive' && t.source.startsWith('%YAML'));
    return fail(
      directive?.offset ?? 0,
      `a definition file is YAML 1.2: remove the "%YAML ${doc.directives.yaml.version}" directive`,
    );
  }
  const problems = doc.warnings.map((w) => ({ ...positionOf(w.pos[0]), message: warningMessage(w, source) }));
  const errors = doc.errors.map((e) => ({
    ...positionOf(e.pos[0]),
    message: `YAML syntax error: ${e.message.replace(/\s+/g, ' ').trim()}`,
  }));
  if (secondDocAt !== undefined) {
    errors.push({
      ...positionOf(secondDocAt),
      message:
        'YAML syntax error: a definition file holds exactly one YAML document; remove the "---" separator',
    });
  }
  if (errors.length > 0) return { ok: false, diagnostics: [...errors, ...problems] };
  return { ok: true, parsed: { doc, positionOf, problems } };
}

/**
 * The YAML library's concrete syntax tree, built one lexical token at a time so that nesting is
 * refused as soon as it passes {@link MAX_NESTING}: the library recurses on deep trees (and takes
 * seconds and hundreds of megabytes over a megabyte of "[").
 */
function tokenize(
  source: string,
  lineCounter: LineCounter,
): { readonly tokens: CST.Token[] } | { readonly tooDeepAt: number } {
  const parser = new Parser(lineCounter.addNewLine);
  lineCounter.addNewLine(0);
  const tokens: CST.Token[] = [];
  for (const lexeme of new Lexer().lex(source)) {
    for (const token of parser.next(lexeme)) tokens.push(token);
    // The stack holds every open collection, plus the document and at most a few partial tokens,
    // so it is checked after each lexical token and never grows past the limit by more than one.
    if (parser.stack.length > MAX_NESTING) {
      const tooDeep = parser.stack.filter(isCollection)[MAX_NESTING];
      if (tooDeep) return { tooDeepAt: tooDeep.offset };
    }
  }
  for (const token of parser.end()) tokens.push(token);
  return { tokens };
}

function isCollection(t: CST.Token): t is CST.BlockMap | CST.BlockSequence | CST.FlowCollection {
  return t.type === 'block-map' || t.type === 'block-seq' || t.type === 'flow-collection';
}

/** The first document, and where a second one starts (a definition file holds exactly one). */
function compose(
  tokens: readonly CST.Token[],
  end: number,
): { readonly doc: Document.Parsed; readonly secondDocAt?: number } {
  const composer = new Composer(PARSE_OPTIONS);
  let doc: Document.Parsed | undefined;
  for (const next of composer.compose(tokens, true, end)) {
    if (doc) return { doc, secondDocAt: next.range[0] };
    doc = next;
  }
  // compose(..., forceDoc = true) always yields a document, if only an empty one.
  if (!doc) throw new Error('the YAML composer yielded no document');
  return { doc };
}

/** A YAML warning as a diagnostic: tags outside the core schema get their own words. */
function warningMessage(w: YAMLError, source: string): string {
  const unresolved = w.code === 'TAG_RESOLVE_FAILED' && /^Unresolved tag: (.*)$/.exec(w.message);
  if (unresolved) {
    const written = source.slice(w.pos[0], w.pos[1]);
    return CORE_TAG_NAMES.has(unresolved[1] ?? '')
      ? `YAML tag ${written} does not fit its value: remove the tag, or write a value of that type`
      : `unknown YAML tag ${written}: a definition file uses only the YAML 1.2 core tags (${CORE_TAG_LIST}); remove it`;
  }
  return `YAML syntax error: ${w.message.replace(/\s+/g, ' ').trim()}`;
}
