import { type Document, LineCounter, parseDocument } from 'yaml';
import type { Diagnostic, Position } from './diagnostics.js';

/** Largest definition file accepted, in UTF-16 code units (about 1 MiB of text). */
export const MAX_SOURCE_LENGTH = 1 << 20;

/** A definition file parsed into a YAML syntax tree that knows where every node came from. */
export interface ParsedSource {
  readonly doc: Document.Parsed;
  /** Maps a source offset to its 1-based line and column. */
  readonly positionOf: (offset: number) => Position;
}

/**
 * Parses definition-file text as one YAML 1.2 document. Syntax errors (including a second
 * document in the same file) come back as diagnostics; duplicate keys are left to the validator,
 * which reports them together with every other problem.
 */
export function parseSource(
  text: string,
):
  | { readonly ok: true; readonly parsed: ParsedSource }
  | { readonly ok: false; readonly diagnostics: Diagnostic[] } {
  const lineCounter = new LineCounter();
  const positionOf = (offset: number): Position => lineCounter.linePos(offset);
  if (text.length > MAX_SOURCE_LENGTH) {
    return {
      ok: false,
      diagnostics: [
        { line: 1, col: 1, message: `definition file is larger than ${MAX_SOURCE_LENGTH} characters` },
      ],
    };
  }
  const doc = parseDocument(text.startsWith('\uFEFF') ? text.slice(1) : text, {
    lineCounter,
    version: '1.2',
    uniqueKeys: false,
    prettyErrors: false,
    merge: false,
  });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      diagnostics: doc.errors.map((e) => ({
        ...positionOf(e.pos[0]),
        message: `YAML syntax error: ${yamlMessage(e)}`,
      })),
    };
  }
  return { ok: true, parsed: { doc, positionOf } };
}

function yamlMessage(e: { code: string; message: string }): string {
  if (e.code === 'MULTIPLE_DOCS')
    return 'a definition file holds exactly one YAML document; remove the "---" separator';
  return e.message.replace(/\s+/g, ' ').trim();
}
